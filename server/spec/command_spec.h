// The rules for a command experiment (spec.command, proto/vramlab/v1/experiment.proto): a program
// of the submitter's own that the daemon runs in place of its worker (docs/COMMANDS.md).
//
// Two halves:
//  - ValidateCommandShape: what any daemon refuses (called from ValidateSpec), needing no policy;
//  - CommandPolicy: the operator's decision (vramlabd --allow-commands, --command-user, the
//    --allowed-dir rules and the tokens file's "commands" role), checked at submit, and the
//    environment and identity the program gets at launch.
// Every refusal names the field or the daemon flag it comes from.
#ifndef VRAMLAB_SERVER_SPEC_COMMAND_SPEC_H_
#define VRAMLAB_SERVER_SPEC_COMMAND_SPEC_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/auth/token_file.h"
#include "server/spec/host_paths.h"
#include "server/spec/spec_limits.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

inline constexpr int kMaxCommandArgs = 256;
inline constexpr size_t kMaxCommandArgBytes = 4096;
inline constexpr int kMaxCommandEnv = 128;

// The fd a command's probe writes the allocator snapshot to (only with memory.record_history);
// fd 3 carries the events as for the worker.
inline constexpr int kCommandSnapshotFd = 5;

// What the daemon sets for each rank of a command of parallel.world_size >= 2, the names torchrun
// sets (docs/COMMANDS.md, "Several processes"); refused in spec.command.env then.
inline constexpr const char* kCommandRankEnvNames[] = {"RANK",
                                                       "LOCAL_RANK",
                                                       "WORLD_SIZE",
                                                       "LOCAL_WORLD_SIZE",
                                                       "GROUP_RANK",
                                                       "GROUP_WORLD_SIZE",
                                                       "ROLE_RANK",
                                                       "ROLE_WORLD_SIZE",
                                                       "ROLE_NAME",
                                                       "MASTER_ADDR",
                                                       "MASTER_PORT",
                                                       "TORCHELASTIC_RUN_ID",
                                                       "TORCHELASTIC_RESTART_COUNT",
                                                       "TORCHELASTIC_MAX_RESTARTS"};

// True when `spec` asks for a command rather than vramlab's worker.
bool IsCommand(const vramlab::v1::ExperimentSpec& spec);

// OK for a spec without a command. Otherwise INVALID_ARGUMENT "spec.command...: ..." when argv is
// empty or oversized, an argument holds a NUL, working_dir is missing or relative, an env entry
// is not KEY=value or sets a name the daemon sets itself (with parallel.world_size >= 2 also the
// rank names, kCommandRankEnvNames), or the spec also asks for what a command cannot have (a
// sweep, fault injection, model or training fields or parallel fields other than world_size
// without has_equivalent_spec).
absl::Status ValidateCommandShape(const vramlab::v1::ExperimentSpec& spec);

// What ValidateSpec does for a spec with a command: ValidateCommandShape, then the ordinary rules
// (server/spec/validate_spec.h) on the rest of the spec, the scheduling fields (priority,
// time_limit_seconds, memory, device) and, with has_equivalent_spec, the model and training.
absl::Status ValidateCommandSpec(const vramlab::v1::ExperimentSpec& spec, const SpecLimits& limits);

// The file `command.argv(0)` names, links resolved, when it lies under an --allowed-dir directory
// and is executable; INVALID_ARGUMENT naming spec.command.argv[0] otherwise.
absl::StatusOr<std::string> ResolveProgram(const HostPathPolicy& paths,
                                           const vramlab::v1::CommandSpec& command);

class CommandPolicy {
 public:
  // Commands refused ("spec.command: commands are disabled on this daemon (vramlabd
  // --allow-commands)").
  CommandPolicy() = default;

  // Commands allowed, run as `user` with the probe under `probe_dir` (the directory that holds
  // sitecustomize.py and the vramlab_probe/ package; it goes first on the program's PYTHONPATH).
  // FAILED_PRECONDITION naming the flag when: `user` is empty or unknown, is root (uid 0) or has
  // group 0, is the daemon's own user (it can read the daemon's tokens, data directory and TLS
  // key), the daemon cannot switch to it (needs root or CAP_SETUID and CAP_SETGID), or `probe_dir`
  // lacks the probe.
  static absl::StatusOr<CommandPolicy> Create(const std::string& user,
                                              const std::string& probe_dir);

  bool allowed() const { return allowed_; }
  const std::string& user() const { return user_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const std::string& probe_dir() const { return probe_dir_; }

  // At submit, for a spec with a command (validated by ValidateCommandShape): PERMISSION_DENIED
  // when commands are disabled or `caller` lacks the "commands" role (with auth on); otherwise
  // argv[0] and working_dir resolved through `paths` (INVALID_ARGUMENT naming the field when
  // outside every --allowed-dir, missing, or of the wrong kind; argv[0] must be executable).
  // working_dir is written back resolved; argv[0] is kept as given (a virtual environment's
  // python finds its environment from it) and resolved again at launch (ResolveProgram).
  absl::Status CheckAndResolve(const Principal& caller, bool auth_enabled,
                               const HostPathPolicy& paths,
                               vramlab::v1::ExperimentSpec* spec) const;

  // The program's complete environment: nothing of the daemon's own is inherited. A fixed PATH,
  // HOME/USER/LOGNAME of the command user, LANG=C.UTF-8, the spec's env, `daemon_env` (the
  // daemon's per-launch settings: CUDA_VISIBLE_DEVICES, allocator settings, thread count,
  // VRAMLAB_EXPERIMENT_ID, a rank's torchrun variables), the probe's settings (VRAMLAB_PROBE_*;
  // VRAMLAB_PROBE_SNAPSHOT_FD only when `snapshot_fd_open`, memory.record_history asks for it and
  // the launch opens kCommandSnapshotFd), and PYTHONPATH with the probe directory first, then the
  // spec's PYTHONPATH if any.
  std::vector<std::string> Environment(const vramlab::v1::ExperimentSpec& spec,
                                       const std::vector<std::string>& daemon_env,
                                       bool snapshot_fd_open) const;

 private:
  bool allowed_ = false;
  std::string user_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string home_;
  std::string probe_dir_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_COMMAND_SPEC_H_
