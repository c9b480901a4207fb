// Exit codes of the vramlab command (documented in docs/CLI.md). Commands that follow an
// experiment to its end (watch, submit --wait/--watch) exit with the outcome's code.
#ifndef VRAMLAB_CLIENT_EXIT_CODES_H_
#define VRAMLAB_CLIENT_EXIT_CODES_H_

#include "absl/status/status.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

enum ExitCode : int {
  kExitOk = 0,         // command done; followed experiment SUCCEEDED
  kExitFailed = 1,     // followed experiment FAILED
  kExitUsage = 2,      // bad flags or arguments, unreadable input, spec rejected (INVALID_ARGUMENT)
  kExitOom = 3,        // followed experiment ended OOM (an answer, not a crash)
  kExitCancelled = 4,  // followed experiment CANCELLED
  kExitInterrupted = 5,  // followed experiment INTERRUPTED (daemon stopped while it ran)
  kExitRpcError = 6,     // daemon unreachable or any other gRPC error
};

// The exit code of a final experiment state; kExitFailed for a state that is not final.
int ExitCodeForState(vramlab::v1::Experiment::State state);

// kExitUsage for INVALID_ARGUMENT (local or from the daemon), kExitRpcError otherwise.
int ExitCodeForError(const absl::Status& status);

// Whether `state` is one an experiment never leaves.
bool IsFinalState(vramlab::v1::Experiment::State state);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_EXIT_CODES_H_
