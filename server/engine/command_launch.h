// How the Engine starts a command experiment (spec.command, server/spec/command_spec.h): the
// program itself in place of vramlab-worker, without a shell, in its own process group, as the
// operator's --command-user, in the spec's working directory, with the environment the policy
// builds and the events pipe on fd 3 as for the worker.
#ifndef VRAMLAB_SERVER_ENGINE_COMMAND_LAUNCH_H_
#define VRAMLAB_SERVER_ENGINE_COMMAND_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/spec/command_spec.h"
#include "server/supervise/spawn.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// The spawn request of `spec` (a command whose paths were resolved at submit). `daemon_env` is
// what the daemon sets for this launch ("KEY=value"). With memory.record_history, the snapshot
// file at `snapshot_path` is created (mode 0600, the daemon's) and passed open for writing as
// kCommandSnapshotFd, so the program writes it without being able to open the data directory.
// The program is argv[0] resolved again under `paths` (a link changed since submit cannot lead
// outside them; INVALID_ARGUMENT then), executed with argv[0] as given. INTERNAL when the snapshot
// file cannot be created.
absl::StatusOr<SpawnRequest> CommandSpawnRequest(const CommandPolicy& policy,
                                                 const HostPathPolicy& paths,
                                                 const vramlab::v1::ExperimentSpec& spec,
                                                 const std::vector<std::string>& daemon_env,
                                                 const std::string& snapshot_path);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_COMMAND_LAUNCH_H_
