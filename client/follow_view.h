// Shows a followed experiment: an ANSI live view redrawn in place when stdout is a terminal, one
// plain line per update otherwise, JSON lines with --json, or nothing until the end (--wait).
#ifndef VRAMLAB_CLIENT_FOLLOW_VIEW_H_
#define VRAMLAB_CLIENT_FOLLOW_VIEW_H_

#include "absl/status/statusor.h"
#include "client/command_env.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

enum class FollowMode {
  kLive,     // live view (ANSI on a terminal, plain lines otherwise)
  kQuiet,    // nothing until the end, then the outcome and the anatomy (submit --wait)
  kOutcome,  // nothing until the end, then only the outcome line (watch --quiet)
};

// Follows `experiment` to its end and prints its outcome and anatomy (kOutcome: the outcome line
// only; with --json, the events as JSON lines in kLive and the final Experiment otherwise). While
// the experiment is queued the live view shows the daemon's start estimate, fetched again at each
// change of queue position. Returns the exit code of the final state.
absl::StatusOr<int> FollowAndShow(CommandEnv& env, const vramlab::v1::Experiment& experiment,
                                  FollowMode mode);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FOLLOW_VIEW_H_
