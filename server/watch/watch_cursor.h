// One watcher's position in an experiment's event stream: history from the store, then live
// events from the channel, resumable from any sequence. Owned by one RPC thread.
#ifndef VRAMLAB_SERVER_WATCH_WATCH_CURSOR_H_
#define VRAMLAB_SERVER_WATCH_WATCH_CURSOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/watch/event_hub.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

class WatchCursor {
 public:
  // Counts as a connected watcher for its lifetime.
  static absl::StatusOr<std::unique_ptr<WatchCursor>> Create(EventHub* hub,
                                                             const std::string& experiment_id,
                                                             int64_t after_sequence,
                                                             bool skip_history_samples);
  ~WatchCursor();

  // Appends the next events to `out` (possibly none, after waiting up to `wait`). Returns false
  // once the experiment has ended and every event was delivered; UNAVAILABLE when the daemon stops.
  absl::StatusOr<bool> Next(std::vector<vramlab::v1::ExperimentEvent>* out, absl::Duration wait);

 private:
  WatchCursor(EventHub* hub, std::string experiment_id, std::shared_ptr<EventChannel> channel,
              int64_t after_sequence, int64_t history_end, bool skip_history_samples);
  absl::StatusOr<bool> ReadStore(int64_t up_to, std::vector<vramlab::v1::ExperimentEvent>* out);
  void Deliver(std::vector<vramlab::v1::ExperimentEvent>* batch,
               std::vector<vramlab::v1::ExperimentEvent>* out);

  EventHub* const hub_;
  const std::string experiment_id_;
  // Null for an experiment that had already finished when the watch began.
  const std::shared_ptr<EventChannel> channel_;
  int64_t next_;
  // Samples up to here are "history" and may be skipped.
  const int64_t history_end_;
  const bool skip_history_samples_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_WATCH_WATCH_CURSOR_H_
