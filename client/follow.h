// Following an experiment to its end over WatchExperiment, surviving dropped connections: the
// stream is resumed after the last sequence seen, so no event is lost or shown twice.
#ifndef VRAMLAB_CLIENT_FOLLOW_H_
#define VRAMLAB_CLIENT_FOLLOW_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/daemon_client.h"

namespace vramlab::client {

struct FollowOptions {
  // Skip the periodic samples of the history already recorded (phase events still come).
  bool skip_history_samples = false;
  // Consecutive failed reconnection attempts before giving up (with 1, 2, 4 ... s pauses).
  int max_reconnects = 5;
  // Stop as soon as the stream ends, even if the experiment is not final (for finished runs).
  bool single_pass = false;
};

// Calls `on_event` once per event in sequence order until the experiment is in a final state,
// then returns the experiment as the daemon has it at the end.
absl::StatusOr<vramlab::v1::Experiment> FollowExperiment(
    DaemonClient& client, const std::string& id, const FollowOptions& options,
    const std::function<void(const vramlab::v1::ExperimentEvent&)>& on_event);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FOLLOW_H_
