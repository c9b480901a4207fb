// Persists experiment events in batches: producers enqueue (never blocking on disk), one thread
// writes a transaction per batch every few milliseconds and then reports what is durable.
// Per experiment, events must be enqueued in sequence order (EventChannel does so under its lock),
// so "persisted up to N" is exact.
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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/store.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

class EventWriter {
 public:
  // `on_persisted(id, sequence)` is called after each commit with the highest sequence of `id` in
  // the batch, on the writer thread.
  using PersistedCallback = std::function<void(const std::string&, int64_t)>;

  EventWriter(Store* store, absl::Duration flush_interval, PersistedCallback on_persisted);
  ~EventWriter();

  void Enqueue(const std::string& experiment_id, const vramlab::v1::ExperimentEvent& event);
  // Blocks until everything enqueued before the call is committed.
  void Flush();
  // Flushes and stops the thread.
  void Stop();

 private:
  void Loop();

  Store* const store_;
  const absl::Duration flush_interval_;
  const PersistedCallback on_persisted_;
  std::thread thread_;

  absl::Mutex mu_;
  std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t committed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_STORE_EVENT_WRITER_H_
