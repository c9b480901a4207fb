// Test support: runs the real vramlab-worker binary on a spec and collects its stdout, with an
// optional early kill (for workers that are meant to misbehave).
#ifndef VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_
#define VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace vramlab::testing {

struct WorkerProcess {
  // Exit code, or the negated signal number.
  int exit_status = 0;
  bool killed_by_test = false;
  std::string output;
};

inline std::string WorkerBinary() {
  const char* dir = std::getenv("VRAMLAB_BIN_DIR");
  return std::string(dir != nullptr ? dir : VRAMLAB_BIN_DIR) + "/vramlab-worker";
}

// `kill_when` is asked after every read (and every 200 ms) with the output so far; true sends
// SIGKILL. Stderr goes to /dev/null.
// `extra_args` follow "--spec FILE" on the worker's command line.
inline WorkerProcess RunWorkerProcess(
    const std::string& spec_json,
    const std::function<bool(const std::string&)>& kill_when = nullptr,
    const std::vector<std::string>& extra_args = {}) {
  char spec_path[] = "/tmp/vramlab-contract-spec-XXXXXX";
  const int spec_fd = mkstemp(spec_path);
  if (spec_fd < 0) throw std::runtime_error("mkstemp failed");
  if (write(spec_fd, spec_json.data(), spec_json.size()) !=
      static_cast<ssize_t>(spec_json.size())) {
    throw std::runtime_error("cannot write the spec");
  }
  close(spec_fd);

  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  const std::string binary = WorkerBinary();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDERR_FILENO);
    std::vector<const char*> argv = {binary.c_str(), "--spec", spec_path};
    for (const std::string& arg : extra_args) argv.push_back(arg.c_str());
    argv.push_back(nullptr);
    execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  close(out[1]);
  WorkerProcess result;
  char buffer[1 << 16];
  for (;;) {
    pollfd fd{out[0], POLLIN, 0};
    const int ready = poll(&fd, 1, 200);
    if (ready > 0) {
      const ssize_t n = read(out[0], buffer, sizeof(buffer));
      if (n <= 0) break;
      result.output.append(buffer, static_cast<size_t>(n));
    }
    if (!result.killed_by_test && kill_when && kill_when(result.output)) {
      kill(pid, SIGKILL);
      result.killed_by_test = true;
    }
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(spec_path);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_
