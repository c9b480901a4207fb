#include "client/follow.h"

#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "common/status_macros.h"

namespace vramlab::client {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;

absl::StatusOr<Experiment> FollowExperiment(
    DaemonClient& client, const std::string& id, const FollowOptions& options,
    const std::function<void(const ExperimentEvent&)>& on_event) {
  int64_t last_sequence = 0;
  int failures = 0;
  while (true) {
    vramlab::v1::WatchExperimentRequest request;
    request.set_id(id);
    request.set_after_sequence(last_sequence);
    request.set_skip_history_samples(options.skip_history_samples);
    const absl::Status status = client.Watch(request, [&](const ExperimentEvent& event) {
      if (event.sequence() <= last_sequence && event.sequence() != 0) return true;
      last_sequence = event.sequence();
      failures = 0;
      on_event(event);
      return true;
    });
    // Only a broken connection is worth retrying; NOT_FOUND, UNAUTHENTICATED... are answers.
    if (!status.ok() && status.code() != absl::StatusCode::kUnavailable) return status;
    if (!status.ok()) {
      if (++failures > options.max_reconnects) return status;
      absl::SleepFor(absl::Seconds(1 << (failures - 1)));
      continue;
    }
    auto experiment = client.Get(id);
    if (!experiment.ok()) {
      if (experiment.status().code() != absl::StatusCode::kUnavailable ||
          ++failures > options.max_reconnects) {
        return experiment.status();
      }
      absl::SleepFor(absl::Seconds(1 << (failures - 1)));
      continue;
    }
    if (IsFinalState(experiment->state()) || options.single_pass) return experiment;
    // The stream ended although the run goes on (e.g. the daemon restarted): resume.
    absl::SleepFor(absl::Milliseconds(200));
  }
}

}  // namespace vramlab::client
