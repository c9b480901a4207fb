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

// Where one process of a command sits in its gang (parallel.world_size processes, one slot each).
struct CommandRank {
  // The experiment's id: torchrun's TORCHELASTIC_RUN_ID.
  std::string run_id;
  int rank = 0;
  int world_size = 1;
  // The loopback port rank 0's process group listens on; 0 for a world of one.
  int master_port = 0;
};

// What the daemon adds to one rank's environment, "KEY=value": for a world of two or more the
// variables torchrun sets (kCommandRankEnvNames: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, ...; all ranks run on this host, so LOCAL_RANK is RANK), and for every command
// VRAMLAB_PROBE_CUDA_DEVICE, the device the probe reads: LOCAL_RANK among the gang's devices,
// which every rank sees in rank order.
std::vector<std::string> CommandRankEnvironment(const CommandRank& rank);

// The spawn request of rank `rank` of `spec` (a command whose paths were resolved at submit).
// `daemon_env` is what the daemon sets for this launch ("KEY=value"; CommandRankEnvironment is
// added to it). With memory.record_history, rank 0's snapshot file at `snapshot_path` is created
// (mode 0600, the daemon's) and passed open for writing as kCommandSnapshotFd, so the program
// writes it without being able to open the data directory; other ranks write none.
// The program is argv[0] resolved again under `paths` (a link changed since submit cannot lead
// outside them; INVALID_ARGUMENT then), executed with argv[0] as given. INTERNAL when the snapshot
// file cannot be created.
absl::StatusOr<SpawnRequest> CommandSpawnRequest(const CommandPolicy& policy,
                                                 const HostPathPolicy& paths,
                                                 const vramlab::v1::ExperimentSpec& spec,
                                                 const CommandRank& rank,
                                                 const std::vector<std::string>& daemon_env,
                                                 const std::string& snapshot_path);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_COMMAND_LAUNCH_H_
