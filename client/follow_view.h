// Shows a followed experiment: an ANSI live view redrawn in place when stdout is a terminal, one
// plain line per update otherwise, JSON lines with --json, or nothing until the end (--wait).
#ifndef VRAMLAB_CLIENT_FOLLOW_VIEW_H_
#define VRAMLAB_CLIENT_FOLLOW_VIEW_H_

#include "absl/status/statusor.h"
#include "client/command_env.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

enum class FollowMode {
  kLive,   // live view (ANSI on a terminal, plain lines otherwise)
  kQuiet,  // nothing until the end, then the outcome
};

// Follows `experiment` to its end and prints its outcome and anatomy (or, with --json, the
// events as JSON lines in kLive and the final Experiment in kQuiet). Returns the exit code of
// the final state.
absl::StatusOr<int> FollowAndShow(CommandEnv& env, const vramlab::v1::Experiment& experiment,
                                  FollowMode mode);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FOLLOW_VIEW_H_
