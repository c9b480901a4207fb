// The live event stream of one active experiment: assigns sequence numbers, keeps the most recent
// events in a bounded ring for live watchers, and hands every event to the EventWriter.
//
// Watchers pull (each has its own cursor); the producer never waits for a watcher, so a slow or
// stuck watcher cannot block the worker pipe or other watchers. A watcher that falls behind the
// ring reads the missed events from the store.
//
// Thread-safe.
#ifndef VRAMLAB_SERVER_WATCH_EVENT_CHANNEL_H_
#define VRAMLAB_SERVER_WATCH_EVENT_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/event_writer.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

class EventChannel {
 public:
  // `last_sequence`: the highest sequence already in the store (the next event gets +1).
  EventChannel(std::string experiment_id, int64_t last_sequence, size_t ring_capacity);

  // Sets sequence and time, keeps the event and enqueues it for the store. Returns the sequence.
  int64_t Publish(vramlab::v1::ExperimentEvent event, EventWriter* writer);
  void MarkPersisted(int64_t sequence);
  // The experiment reached a final state: no event follows.
  void Close();
  // The daemon is stopping: watchers end with UNAVAILABLE.
  void Shutdown();

  enum class ReadResult {
    kEvents,     // `out` has events starting at `next`
    kFromStore,  // `next` is older than the ring: read the store up to `*persisted`
    kTimeout,    // nothing new within `wait`
    kEnded,      // closed and `next` is past the last event
    kShutdown,
  };
  // `store_failing`: the store refuses writes now (EventWriter::failing). Only then does a closed
  // channel serve a watcher from the ring past events that are not committed yet; a store that is
  // merely slow is waited for (kTimeout), so no event is skipped.
  ReadResult Read(int64_t next, size_t max_events, absl::Duration wait, bool store_failing,
                  std::vector<vramlab::v1::ExperimentEvent>* out, int64_t* persisted);

  int64_t last_sequence() const;
  bool closed() const;
  // Closed and every event committed.
  bool Drained() const;
  // Watchers currently attached (for queue-position events and metrics).
  void AddWatcher(int delta);
  int watchers() const;

 private:
  const std::string experiment_id_;
  const size_t ring_capacity_;
  mutable absl::Mutex mu_;
  int64_t next_sequence_ ABSL_GUARDED_BY(mu_);
  int64_t persisted_sequence_ ABSL_GUARDED_BY(mu_);
  std::deque<vramlab::v1::ExperimentEvent> ring_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_WATCH_EVENT_CHANNEL_H_
