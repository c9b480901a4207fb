// Test helpers for the metrics and deployment tests: running a command and capturing its output,
// a free loopback port, and a real Prometheus server (Debian's /usr/bin/prometheus) scraping one
// target every second, queried through its HTTP API with curl.
//
// Header-only because tests/ links each *_test.cc as its own binary; include from one .cc each.
// Not thread-safe: one test thread drives a PrometheusProcess.
#ifndef VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_
#define VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
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
#include "tests/support/child_process.h"
#include "tests/support/loopback_port.h"

namespace vramlab::testing {

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal; 127: could not be executed
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (searched in PATH) with no shell, feeding `input` on stdin; waits for it.
inline CommandResult RunCommand(const std::vector<std::string>& argv,
                                const std::string& input = "") {
  const ChildResult ended =
      RunChild({.argv = argv, .stdin_text = input, .stderr_with_stdout = true});
  return CommandResult{ended.exit_code, ended.out};
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
    const std::string log = p->dir_ + "/prometheus.log";
    try {
      // Prometheus must not outlive a crashed test binary.
      p->process_ = std::make_unique<ChildProcess>(ChildOptions{
          .argv = argv, .stdout_file = log, .stderr_with_stdout = true, .die_with_parent = true});
    } catch (const std::runtime_error& e) {
      return absl::InternalError(e.what());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      if (p->Get("/-/ready").ok()) return p;
      if (p->process_->Exited()) {
        p->process_.reset();
        return absl::UnavailableError(absl::StrCat("prometheus exited: ", p->ReadLog()));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return absl::DeadlineExceededError("prometheus not ready after 60 s");
  }

  ~PrometheusProcess() {
    if (process_ != nullptr) {
      process_->Signal(SIGTERM);
      process_->Wait();
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
  std::unique_ptr<ChildProcess> process_;  // null once it exited
};

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_METRICS_PROMETHEUS_PROCESS_H_
