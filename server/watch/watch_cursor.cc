#include "server/watch/watch_cursor.h"

#include <algorithm>
#include <limits>

#include "common/status_macros.h"

namespace vramlab::server {
namespace {

constexpr size_t kBatch = 256;

}  // namespace

absl::StatusOr<std::unique_ptr<WatchCursor>> WatchCursor::Create(EventHub* hub,
                                                                 const std::string& experiment_id,
                                                                 int64_t after_sequence,
                                                                 bool skip_history_samples) {
  std::shared_ptr<EventChannel> channel = hub->Find(experiment_id);
  int64_t history_end = 0;
  if (channel != nullptr) {
    history_end = channel->last_sequence();
  } else {
    ASSIGN_OR_RETURN(history_end, hub->store()->MaxEventSequence(experiment_id));
  }
  return std::unique_ptr<WatchCursor>(new WatchCursor(
      hub, experiment_id, std::move(channel), after_sequence, history_end, skip_history_samples));
}

WatchCursor::WatchCursor(EventHub* hub, std::string experiment_id,
                         std::shared_ptr<EventChannel> channel, int64_t after_sequence,
                         int64_t history_end, bool skip_history_samples)
    : hub_(hub),
      experiment_id_(std::move(experiment_id)),
      channel_(std::move(channel)),
      // Clamped so that next_ never overflows: no sequence reaches INT64_MAX.
      next_(std::clamp<int64_t>(after_sequence, 0, std::numeric_limits<int64_t>::max() - 1) + 1),
      history_end_(history_end),
      skip_history_samples_(skip_history_samples) {
  hub_->AddWatcher(channel_.get(), 1);
}

WatchCursor::~WatchCursor() { hub_->AddWatcher(channel_.get(), -1); }

void WatchCursor::Deliver(std::vector<vramlab::v1::ExperimentEvent>* batch,
                          std::vector<vramlab::v1::ExperimentEvent>* out) {
  for (auto& event : *batch) {
    next_ = event.sequence() + 1;
    bool history_sample = event.sequence() <= history_end_ && event.has_worker_event() &&
                          event.worker_event().has_sample();
    if (skip_history_samples_ && history_sample) continue;
    out->push_back(std::move(event));
  }
}

absl::StatusOr<bool> WatchCursor::ReadStore(int64_t up_to,
                                            std::vector<vramlab::v1::ExperimentEvent>* out) {
  // Past `up_to` there is nothing to read here: reported as "nothing found", never as progress,
  // so that a caller looping on a finished experiment ends instead of spinning.
  if (next_ > up_to) return false;
  // next_ >= 1, so up_to - next_ cannot overflow.
  int limit = static_cast<int>(std::min<int64_t>(kBatch, up_to - next_ + 1));
  ASSIGN_OR_RETURN(auto events, hub_->store()->ReadEvents(experiment_id_, next_ - 1, limit));
  if (events.empty()) return false;
  Deliver(&events, out);
  return true;
}

absl::StatusOr<bool> WatchCursor::Next(std::vector<vramlab::v1::ExperimentEvent>* out,
                                       absl::Duration wait) {
  if (channel_ == nullptr) {
    // Finished before the watch began: everything is in the store, up to history_end_.
    return ReadStore(history_end_, out);
  }
  std::vector<vramlab::v1::ExperimentEvent> batch;
  int64_t persisted = 0;
  switch (channel_->Read(next_, kBatch, wait, hub_->StoreFailing(), &batch, &persisted)) {
    case EventChannel::ReadResult::kEvents:
      Deliver(&batch, out);
      return true;
    case EventChannel::ReadResult::kFromStore: {
      ASSIGN_OR_RETURN(bool found, ReadStore(persisted, out));
      // Nothing stored below `persisted` means those events were lost to a failed write: skip.
      if (!found) next_ = std::max(next_, persisted + 1);
      return true;
    }
    case EventChannel::ReadResult::kTimeout:
      return true;
    case EventChannel::ReadResult::kEnded:
      return false;
    case EventChannel::ReadResult::kShutdown:
      return absl::UnavailableError("the daemon is shutting down");
  }
  return true;
}

}  // namespace vramlab::server
