#include "server/engine/command_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "absl/strings/str_cat.h"
#include "server/supervise/tagged_processes.h"

namespace vramlab::server {

std::vector<std::string> CommandRankEnvironment(const CommandRank& rank) {
  std::vector<std::string> env = {absl::StrCat("VRAMLAB_PROBE_CUDA_DEVICE=", rank.rank)};
  if (rank.world_size < 2) return env;
  const std::string r = absl::StrCat(rank.rank);
  const std::string n = absl::StrCat(rank.world_size);
  env.insert(env.end(),
             {"RANK=" + r, "LOCAL_RANK=" + r, "GROUP_RANK=0", "ROLE_RANK=" + r, "WORLD_SIZE=" + n,
              "LOCAL_WORLD_SIZE=" + n, "GROUP_WORLD_SIZE=1", "ROLE_WORLD_SIZE=" + n,
              "ROLE_NAME=default", "MASTER_ADDR=127.0.0.1",
              absl::StrCat("MASTER_PORT=", rank.master_port), "TORCHELASTIC_RUN_ID=" + rank.run_id,
              "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0"});
  return env;
}

absl::StatusOr<SpawnRequest> CommandSpawnRequest(const CommandPolicy& policy,
                                                 const HostPathPolicy& paths,
                                                 const vramlab::v1::ExperimentSpec& spec,
                                                 const CommandRank& rank,
                                                 const std::vector<std::string>& daemon_env,
                                                 const std::string& snapshot_path) {
  const vramlab::v1::CommandSpec& command = spec.command();
  absl::StatusOr<std::string> program = ResolveProgram(paths, command);
  if (!program.ok()) return program.status();
  SpawnRequest request;
  request.path = *program;
  request.argv0 = command.argv(0);
  request.args.assign(command.argv().begin() + 1, command.argv().end());
  std::vector<std::string> env = daemon_env;
  for (std::string& entry : CommandRankEnvironment(rank)) env.push_back(std::move(entry));
  request.process_tag = ProcessTagEntry(rank.run_id, rank.rank, NewProcessTagNonce());
  env.push_back(request.process_tag);
  const bool writes_snapshot = spec.memory().record_history() && rank.rank == 0;
  request.env = policy.Environment(spec, env, writes_snapshot);
  request.working_dir = command.working_dir();
  request.uid = policy.uid();
  request.gid = policy.gid();
  if (writes_snapshot) {
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
