// Persists experiment events in batches: producers enqueue (never blocking on disk), one thread
// writes a transaction per batch every few milliseconds and then reports what is durable.
// Per experiment, events must be enqueued in sequence order (EventChannel does so under its lock),
// so "persisted up to N" is exact.
//
// A batch the store refuses (disk full, I/O error) is held in memory and retried, oldest first,
// with a backoff of 50 ms doubling to 5 s, until it is stored. Nothing is dropped silently: only
// when more than `max_held_events` are held, or at Stop after `stop_timeout` of failures, are
// the oldest held events given up, and they are counted (Stats) and logged.
//
// Thread-safe.
#ifndef VRAMLAB_SERVER_STORE_EVENT_WRITER_H_
#define VRAMLAB_SERVER_STORE_EVENT_WRITER_H_

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/store.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

struct EventWriterOptions {
  absl::Duration flush_interval = absl::Milliseconds(20);
  // Events held for retry beyond this are given up (oldest first) and counted.
  size_t max_held_events = 1 << 20;
  // How long Stop keeps retrying a failing store before giving up what is held.
  absl::Duration stop_timeout = absl::Seconds(10);
};

// Events not (yet) in the store.
struct EventStorageStats {
  int64_t held = 0;     // kept in memory, being retried
  int64_t dropped = 0;  // given up: never stored
};

class EventWriter {
 public:
  // `on_persisted(id, sequence)` is called after each commit with the highest sequence of `id` in
  // the batch, on the writer thread; also for events given up, which readers then skip.
  using PersistedCallback = std::function<void(const std::string&, int64_t)>;

  EventWriter(Store* store, EventWriterOptions options, PersistedCallback on_persisted);
  ~EventWriter();

  void Enqueue(const std::string& experiment_id, const vramlab::v1::ExperimentEvent& event);
  // Blocks until everything enqueued before the call is committed (or given up), or `timeout`
  // passes; true when it was.
  bool Flush(absl::Duration timeout = absl::InfiniteDuration());
  // Flushes (up to options.stop_timeout) and stops the thread.
  void Stop();

  // True from a failed write until the next successful one.
  bool failing() const;
  EventStorageStats Stats(const std::string& experiment_id) const;
  EventStorageStats Totals() const;

 private:
  using Batch = std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>>;
  void Loop();
  // Gives up the first `count` held events: counted, logged, reported as persisted.
  void DropOldest(Batch* held, size_t count, const std::string& why);
  void ReportPersisted(const Batch& events, size_t count);
  void CountHeld(const Batch& held);

  Store* const store_;
  const EventWriterOptions options_;
  const PersistedCallback on_persisted_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  Batch pending_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t committed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, EventStorageStats> stats_ ABSL_GUARDED_BY(mu_);
  EventStorageStats totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_EVENT_WRITER_H_
