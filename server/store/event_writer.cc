#include "server/store/event_writer.h"

#include <algorithm>
#include <cstdio>

namespace vramlab::server {
namespace {

// A batch this large is written without waiting for the interval.
constexpr size_t kEagerBatch = 512;
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

}  // namespace

EventWriter::EventWriter(Store* store, EventWriterOptions options, PersistedCallback on_persisted)
    : store_(store), options_(options), on_persisted_(std::move(on_persisted)) {
  thread_ = std::thread([this] { Loop(); });
}

EventWriter::~EventWriter() { Stop(); }

void EventWriter::Enqueue(const std::string& experiment_id,
                          const vramlab::v1::ExperimentEvent& event) {
  absl::MutexLock lock(&mu_);
  pending_.emplace_back(experiment_id, event);
  ++enqueued_;
}

bool EventWriter::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  uint64_t target = enqueued_;
  auto done = [this, target]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return committed_ >= target || stop_; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void EventWriter::Stop() {
  if (!thread_.joinable()) return;
  Flush(options_.stop_timeout);
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

bool EventWriter::failing() const {
  absl::MutexLock lock(&mu_);
  return failing_;
}

EventStorageStats EventWriter::Stats(const std::string& experiment_id) const {
  absl::MutexLock lock(&mu_);
  auto it = stats_.find(experiment_id);
  return it == stats_.end() ? EventStorageStats{} : it->second;
}

EventStorageStats EventWriter::Totals() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

void EventWriter::ReportPersisted(const Batch& events, size_t count) {
  absl::flat_hash_map<std::string, int64_t> highest;
  for (size_t i = 0; i < count; ++i) {
    int64_t& h = highest[events[i].first];
    h = std::max(h, events[i].second.sequence());
  }
  for (const auto& [id, sequence] : highest) on_persisted_(id, sequence);
}

void EventWriter::CountHeld(const Batch& held) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(stats_, [](const auto& entry) { return entry.second.dropped == 0; });
  for (auto& [id, stats] : stats_) stats.held = 0;
  for (const auto& [id, event] : held) ++stats_[id].held;
  totals_.held = static_cast<int64_t>(held.size());
}

void EventWriter::DropOldest(Batch* held, size_t count, const std::string& why) {
  count = std::min(count, held->size());
  if (count == 0) return;
  ReportPersisted(*held, count);
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < count; ++i) ++stats_[(*held)[i].first].dropped;
    totals_.dropped += static_cast<int64_t>(count);
    committed_ += count;
  }
  std::fprintf(stderr, "vramlabd: %zu events could not be stored and are given up (%s)\n", count,
               why.c_str());
  held->erase(held->begin(), held->begin() + static_cast<ptrdiff_t>(count));
}

void EventWriter::Loop() {
  Batch held;  // refused by the store, oldest first; retried before anything newer
  absl::Duration backoff = absl::ZeroDuration();
  while (true) {
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || pending_.size() >= kEagerBatch;
      };
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (held.empty()) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), options_.flush_interval);
      } else {
        mu_.AwaitWithTimeout(absl::Condition(&stopped), backoff);
      }
      if (stop_ && pending_.empty() && held.empty()) return;
      stopping = stop_;
      std::move(pending_.begin(), pending_.end(), std::back_inserter(held));
      pending_.clear();
    }
    if (held.empty()) continue;
    absl::Status status = store_->AppendEvents(held);
    if (status.ok()) {
      backoff = absl::ZeroDuration();
      ReportPersisted(held, held.size());
      const size_t stored = held.size();
      held.clear();
      // Before committed_ moves: a Flush() that this commit ends sees the held counts without it.
      CountHeld(held);
      {
        absl::MutexLock lock(&mu_);
        committed_ += stored;
        failing_ = false;
      }
      continue;
    }
    bool first_failure = backoff == absl::ZeroDuration();
    backoff = std::min(kMaxBackoff, first_failure ? kFirstBackoff : backoff * 2);
    {
      absl::MutexLock lock(&mu_);
      failing_ = true;
    }
    if (first_failure) {
      std::fprintf(stderr, "vramlabd: writing %zu events failed, holding them to retry: %s\n",
                   held.size(), std::string(status.message()).c_str());
    }
    if (stopping) {
      DropOldest(
          &held, held.size(),
          "the daemon is stopping and the store still fails: " + std::string(status.message()));
    } else if (held.size() > options_.max_held_events) {
      DropOldest(&held, held.size() - options_.max_held_events,
                 "more than the held-event bound while the store fails");
    }
    CountHeld(held);
  }
}

}  // namespace vramlab::server
