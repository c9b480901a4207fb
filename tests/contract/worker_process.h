// Test support: runs the real vramlab-worker binary on a spec and collects its stdout, with an
// optional early kill (for workers that are meant to misbehave).
#ifndef VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_
#define VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

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

// `kill_when` is asked after every read (and every 50 ms) with the output so far; true sends
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

  std::vector<std::string> argv = {WorkerBinary(), "--spec", spec_path};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  ChildProcess child({.argv = argv, .stderr_file = "/dev/null"});
  const ChildResult ended = child.Wait(ChildProcess::kNoLimit, kill_when);
  unlink(spec_path);
  WorkerProcess result;
  result.output = ended.out;
  result.killed_by_test = ended.killed;
  result.exit_status = ended.signal != 0 ? -ended.signal : ended.exit_code;
  return result;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_CONTRACT_WORKER_PROCESS_H_
