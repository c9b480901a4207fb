#include "server/watch/event_channel.h"

#include "server/common/timestamp.h"

namespace vramlab::server {

EventChannel::EventChannel(std::string experiment_id, int64_t last_sequence, size_t ring_capacity)
    : experiment_id_(std::move(experiment_id)),
      ring_capacity_(ring_capacity),
      next_sequence_(last_sequence + 1),
      persisted_sequence_(last_sequence) {}

int64_t EventChannel::Publish(vramlab::v1::ExperimentEvent event, EventWriter* writer) {
  absl::MutexLock lock(&mu_);
  event.set_sequence(next_sequence_++);
  *event.mutable_time() = NowTimestamp();
  // Enqueued under mu_ so that this experiment's events reach the writer in sequence order.
  writer->Enqueue(experiment_id_, event);
  int64_t sequence = event.sequence();
  ring_.push_back(std::move(event));
  if (ring_.size() > ring_capacity_) ring_.pop_front();
  return sequence;
}

void EventChannel::MarkPersisted(int64_t sequence) {
  absl::MutexLock lock(&mu_);
  persisted_sequence_ = std::max(persisted_sequence_, sequence);
}

void EventChannel::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

void EventChannel::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

EventChannel::ReadResult EventChannel::Read(int64_t next, size_t max_events, absl::Duration wait,
                                            bool store_failing,
                                            std::vector<vramlab::v1::ExperimentEvent>* out,
                                            int64_t* persisted) {
  absl::MutexLock lock(&mu_);
  auto progress = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_ || closed_ || next_sequence_ > next) return true;
    return false;
  };
  mu_.AwaitWithTimeout(absl::Condition(&progress), wait);
  if (shutdown_) return ReadResult::kShutdown;
  if (next >= next_sequence_) return closed_ ? ReadResult::kEnded : ReadResult::kTimeout;
  int64_t ring_start = ring_.empty() ? next_sequence_ : ring_.front().sequence();
  if (next < ring_start && next > persisted_sequence_) {
    // Evicted from the ring before the writer committed it: wait for the commit.
    auto committed = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || persisted_sequence_ >= next;
    };
    bool stored = mu_.AwaitWithTimeout(absl::Condition(&committed), wait);
    if (shutdown_) return ReadResult::kShutdown;
    if (!stored && !(closed_ && store_failing)) return ReadResult::kTimeout;
    // Still not stored after the run ended and the store refuses writes: go on from the ring,
    // which ends with the final state, rather than wait on the disk. The skipped events stay held.
    if (!stored) next = ring_start;
  }
  if (next < ring_start) {
    *persisted = persisted_sequence_;
    return ReadResult::kFromStore;
  }
  for (size_t i = static_cast<size_t>(next - ring_start); i < ring_.size(); ++i) {
    if (out->size() >= max_events) break;
    out->push_back(ring_[i]);
  }
  return ReadResult::kEvents;
}

int64_t EventChannel::last_sequence() const {
  absl::MutexLock lock(&mu_);
  return next_sequence_ - 1;
}

bool EventChannel::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool EventChannel::Drained() const {
  absl::MutexLock lock(&mu_);
  return closed_ && persisted_sequence_ >= next_sequence_ - 1;
}

void EventChannel::AddWatcher(int delta) {
  absl::MutexLock lock(&mu_);
  watchers_ += delta;
}

int EventChannel::watchers() const {
  absl::MutexLock lock(&mu_);
  return watchers_;
}

}  // namespace vramlab::server
