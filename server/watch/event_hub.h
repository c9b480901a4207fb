// All live event channels of the daemon, keyed by experiment id, plus the writer that persists
// their events. A channel exists from submission (or recovery) until the experiment has reached a
// final state and all its events are committed; after that watchers read the store alone.
//
// Thread-safe.
#ifndef VRAMLAB_SERVER_WATCH_EVENT_HUB_H_
#define VRAMLAB_SERVER_WATCH_EVENT_HUB_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/store/event_writer.h"
#include "server/store/store.h"
#include "server/watch/event_channel.h"

namespace vramlab::server {

struct EventHubOptions {
  size_t ring_capacity = 2048;
  absl::Duration flush_interval = absl::Milliseconds(20);
};

class EventHub {
 public:
  EventHub(Store* store, EventHubOptions options);
  ~EventHub();

  Store* store() const { return store_; }

  // Opens the channel of `experiment_id` (or returns the open one).
  std::shared_ptr<EventChannel> Open(const std::string& experiment_id, int64_t last_sequence);
  // Null when the experiment has no live channel (finished and drained, or unknown).
  std::shared_ptr<EventChannel> Find(const std::string& experiment_id) const;
  // Publishes on the open channel; returns the sequence, or 0 if no channel is open.
  int64_t Publish(const std::string& experiment_id, vramlab::v1::ExperimentEvent event);
  // Final state published: the channel goes away once its events are committed.
  void Close(const std::string& experiment_id);
  // Ends every watch with UNAVAILABLE (daemon stopping).
  void Shutdown();
  // Commits everything published so far (or gives up after `timeout`; false then).
  bool Flush(absl::Duration timeout = absl::InfiniteDuration());
  void Stop();

  // Connected watchers, all experiments together. `on_change` is told the new total.
  void SetWatcherListener(std::function<void(int)> on_change);
  void AddWatcher(EventChannel* channel, int delta);
  int watchers() const;

  // Events of `experiment_id` not in the store yet (held for retry) or given up.
  EventStorageStats StorageStats(const std::string& experiment_id) const {
    return writer_.Stats(experiment_id);
  }
  EventStorageStats StorageTotals() const { return writer_.Totals(); }
  // True while the store refuses event writes.
  bool StoreFailing() const { return writer_.failing(); }

 private:
  void OnPersisted(const std::string& experiment_id, int64_t sequence);

  Store* const store_;
  const EventHubOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<EventChannel>> channels_ ABSL_GUARDED_BY(mu_);
  std::function<void(int)> on_watchers_ ABSL_GUARDED_BY(mu_);
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Last member: its thread calls OnPersisted, so it must stop before the rest is destroyed.
  EventWriter writer_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_WATCH_EVENT_HUB_H_
