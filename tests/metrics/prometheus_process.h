// Test helpers for the metrics and deployment tests: running a command and capturing its output,
// a free loopback port, and a real Prometheus server (Debian's /usr/bin/prometheus) scraping one
// target every second, queried through its HTTP API with curl.
//
// Header-only because tests/ links each *_test.cc as its own binary; include from one .cc each.
// Not thread-safe: one test thread drives a PrometheusProcess.
#ifndef VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_
#define VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/loopback_port.h"

extern char** environ;

namespace vramlab::testing {

struct CommandResult {
  int exit_code = -1;  // -1: could not start or killed by a signal
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (searched in PATH) with no shell, feeding `input` on stdin; waits for it.
inline CommandResult RunCommand(const std::vector<std::string>& argv,
                                const std::string& input = "") {
  CommandResult result;
  int out_pipe[2], in_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(in_pipe) != 0) return result;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, in_pipe[1]);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (spawned != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    return result;
  }
  // Write stdin from a thread so a child that writes a lot before reading cannot deadlock us.
  std::thread writer([fd = in_pipe[1], &input] {
    size_t done = 0;
    while (done < input.size()) {
      const ssize_t n = write(fd, input.data() + done, input.size() - done);
      if (n <= 0) break;
      done += n;
    }
    close(fd);
  });
  char buffer[65536];
  for (ssize_t n; (n = read(out_pipe[0], buffer, sizeof buffer)) > 0;)
    result.output.append(buffer, n);
  close(out_pipe[0]);
  writer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// GET http://127.0.0.1:port/path; the body, or an error for a failed request or a non-2xx status.
inline absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  CommandResult r = RunCommand(
      {"curl", "-sS", "--fail", "--max-time", "10", absl::StrCat("http://127.0.0.1:", port, path)});
  if (r.exit_code != 0) return absl::UnavailableError(absl::StrCat("GET ", path, ": ", r.output));
  return r.output;
}

inline std::string SourceDir() {
  const char* dir = std::getenv("VRAMLAB_SOURCE_DIR");
  return dir != nullptr ? dir : VRAMLAB_SOURCE_DIR;
}

class PrometheusProcess {
 public:
  // Starts Prometheus scraping `target` ("127.0.0.1:PORT") as job "vramlabd" every second, with
  // its storage in a fresh temporary directory; returns once /-/ready answers.
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(const std::string& target) {
    auto p = std::unique_ptr<PrometheusProcess>(new PrometheusProcess());
    char dir_template[] = "/tmp/vramlab-prometheus-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
    p->dir_ = dir_template;
    p->port_ = FreeLoopbackPort();
    const std::string config = p->dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: vramlabd\n    scrape_timeout: 900ms\n"
                          << "    static_configs:\n      - targets: ['" << target << "']\n";
    // Debian's binary, unless VRAMLAB_PROMETHEUS names another (a GPU host without the package
    // installed runs the one unpacked from it by scripts/gpu-build.sh).
    const char* binary = std::getenv("VRAMLAB_PROMETHEUS");
    std::vector<std::string> argv = {
        binary != nullptr && *binary != '\0' ? binary : "/usr/bin/prometheus",
        "--config.file=" + config, "--storage.tsdb.path=" + p->dir_ + "/data",
        absl::StrCat("--web.listen-address=127.0.0.1:", p->port_), "--log.level=warn"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const std::string log = p->dir_ + "/prometheus.log";
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return absl::InternalError("cannot create " + log);
    const pid_t parent = getpid();
    p->pid_ = fork();
    if (p->pid_ < 0) return absl::InternalError("fork failed");
    if (p->pid_ == 0) {
      // Prometheus must not outlive a crashed test binary.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
    close(log_fd);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      if (p->Get("/-/ready").ok()) return p;
      int status;
      if (waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
        p->pid_ = -1;
        return absl::UnavailableError(absl::StrCat("prometheus exited: ", p->ReadLog()));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return absl::DeadlineExceededError("prometheus not ready after 60 s");
  }

  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  int port() const { return port_; }
  std::string ReadLog() const {
    std::ifstream in(dir_ + "/prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  absl::StatusOr<std::string> Get(const std::string& path) const { return HttpGet(port_, path); }

  // Evaluates `expr` at the current time with /api/v1/query; returns data.result (a JSON array
  // for vector results) or an error naming Prometheus's complaint.
  absl::StatusOr<nlohmann::json> Query(const std::string& expr) const {
    CommandResult r = RunCommand({"curl", "-sS", "--max-time", "10", "-G",
                                  absl::StrCat("http://127.0.0.1:", port_, "/api/v1/query"),
                                  "--data-urlencode", "query=" + expr});
    if (r.exit_code != 0) return absl::UnavailableError(r.output);
    nlohmann::json body = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return absl::InternalError("not JSON: " + r.output);
    if (body.value("status", "") != "success") {
      return absl::InvalidArgumentError(absl::StrCat(expr, ": ", body.value("error", r.output)));
    }
    return body["data"]["result"];
  }

  // The value of a query that must return exactly one series, or nullopt when it returns none.
  absl::StatusOr<std::optional<double>> ScalarQuery(const std::string& expr) const {
    auto result = Query(expr);
    if (!result.ok()) return result.status();
    if (result->empty()) return std::optional<double>();
    if (result->size() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(expr, " returned ", result->dump()));
    }
    return std::optional<double>(std::stod((*result)[0]["value"][1].get<std::string>()));
  }

  // Polls `expr` until it returns one series whose value satisfies `accept`, or `timeout`.
  template <typename Predicate>
  absl::StatusOr<double> WaitForValue(const std::string& expr, Predicate accept,
                                      absl::Duration timeout = absl::Seconds(30)) const {
    const absl::Time deadline = absl::Now() + timeout;
    std::string last = "no result";
    while (absl::Now() < deadline) {
      auto value = ScalarQuery(expr);
      if (!value.ok()) return value.status();
      if (value->has_value()) {
        if (accept(**value)) return **value;
        last = absl::StrCat(**value);
      }
      absl::SleepFor(absl::Milliseconds(250));
    }
    return absl::DeadlineExceededError(absl::StrCat(expr, ": last ", last));
  }

 private:
  PrometheusProcess() = default;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_
