#include "client/exit_codes.h"

namespace vramlab::client {

using vramlab::v1::Experiment;

int ExitCodeForState(Experiment::State state) {
  switch (state) {
    case Experiment::SUCCEEDED:
      return kExitOk;
    case Experiment::OOM:
      return kExitOom;
    case Experiment::CANCELLED:
      return kExitCancelled;
    case Experiment::INTERRUPTED:
      return kExitInterrupted;
    default:
      return kExitFailed;
  }
}

int ExitCodeForError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRpcError;
}

bool IsFinalState(Experiment::State state) {
  switch (state) {
    case Experiment::SUCCEEDED:
    case Experiment::OOM:
    case Experiment::FAILED:
    case Experiment::CANCELLED:
    case Experiment::INTERRUPTED:
      return true;
    default:
      return false;
  }
}

}  // namespace vramlab::client
