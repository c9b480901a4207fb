// Starts one vramlab-worker process. Called only from the supervisor thread: PR_SET_PDEATHSIG
// fires when the *thread* that forked exits, so the forking thread must live as long as the
// daemon. The child gets its own process group (so cancel signals reach anything it starts), dies
// with the daemon, and sees: fd 0 /dev/null, fd 1 and 2 the log pipe, fd 3 the events pipe.
#ifndef VRAMLAB_SERVER_SUPERVISE_SPAWN_H_
#define VRAMLAB_SERVER_SUPERVISE_SPAWN_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vramlab::server {

// The fd number the worker writes events to (--events-fd).
inline constexpr int kWorkerEventsFd = 3;

struct SpawnRequest {
  std::string path;
  std::vector<std::string> args;  // not including argv[0]
  std::vector<std::string> env;   // complete environment, "KEY=value"
  // The program's argv[0] when it differs from `path` (a link the daemon resolved: a Python in a
  // virtual environment finds the environment from its argv[0]). Empty: `path`.
  std::string argv0;
  // Empty: the daemon's working directory. Else the child starts there.
  std::string working_dir;
  // Set: the child drops to this user and group (supplementary groups cleared, no new
  // privileges) before exec. Never 0.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // >= 0: an fd of the daemon's that the child gets as fd `extra_fd_target` (in
  // kWorkerEventsFd + 2 .. 99). SpawnWorkerProcess leaves it open; through a LaunchRequest the
  // supervisor closes it once the spawn is done.
  int extra_fd = -1;
  int extra_fd_target = -1;
  // Set for a command experiment's process (with `uid`): its entry in `env` that every process it
  // starts inherits (server/supervise/tagged_processes.h), by which the supervisor finds the
  // processes it left outside its process group.
  std::string process_tag;
  // >= 0: cgroup.procs of the cgroup the child joins before it drops privileges and execs
  // (server/supervise/job_cgroup.h); the caller keeps and closes it. A failed join leaves the
  // child where the daemon is (the tag still finds what it starts).
  int cgroup_fd = -1;
};

struct SpawnedProcess {
  pid_t pid = -1;      // also its process group id
  int events_fd = -1;  // read end, non-blocking, close-on-exec
  int log_fd = -1;     // read end of stdout+stderr, non-blocking, close-on-exec
};

// INTERNAL when pipes or fork fail; FAILED_PRECONDITION when the working directory, the user
// switch or exec fails (the child is reaped), naming which.
absl::StatusOr<SpawnedProcess> SpawnWorkerProcess(const SpawnRequest& request);

// The daemon's environment with `overrides` applied ("KEY=value" sets, "KEY" alone removes).
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& overrides);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_SPAWN_H_
