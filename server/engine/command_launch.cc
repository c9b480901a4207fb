#include "server/engine/command_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "absl/strings/str_cat.h"

namespace vramlab::server {

absl::StatusOr<SpawnRequest> CommandSpawnRequest(const CommandPolicy& policy,
                                                 const HostPathPolicy& paths,
                                                 const vramlab::v1::ExperimentSpec& spec,
                                                 const std::vector<std::string>& daemon_env,
                                                 const std::string& snapshot_path) {
  const vramlab::v1::CommandSpec& command = spec.command();
  absl::StatusOr<std::string> program = ResolveProgram(paths, command);
  if (!program.ok()) return program.status();
  SpawnRequest request;
  request.path = *program;
  request.argv0 = command.argv(0);
  request.args.assign(command.argv().begin() + 1, command.argv().end());
  request.env = policy.Environment(spec, daemon_env);
  request.working_dir = command.working_dir();
  request.uid = policy.uid();
  request.gid = policy.gid();
  if (spec.memory().record_history()) {
    int fd = open(snapshot_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("create ", snapshot_path, ": ", strerror(errno)));
    }
    request.extra_fd = fd;
    request.extra_fd_target = kCommandSnapshotFd;
  }
  return request;
}

}  // namespace vramlab::server
