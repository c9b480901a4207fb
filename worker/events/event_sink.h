// Writes WorkerEvent JSON lines to a file descriptor (stdout or the daemon's --events-fd): each
// event is a plain::WorkerEvent written by the JSON writer generated from memory.proto
// (schema/plain_proto.py), so every key is a field of the proto the daemon parses it into.
//
// The stream's presence rules, which the sink applies whatever its caller set: a phase event and
// an OOM report always carry their memory reading, a sweep point and a final report (and each of
// its sweep points) their anatomy, and the worker never writes WorkerEvent.rank (the daemon
// stamps it).
//
// Thread-safety: every method may be called from any thread (the training loop and the sampler
// thread both write); a mutex keeps lines whole and in order.
//
// Samples are batched: they wait in `pending_` until kSampleBatchWindow has passed since the
// oldest of them or the batch reached kSampleBatchBytes, and any other event writes them first.
// At 10 ms sampling that is one write(2) per ~5 samples instead of one each (a system call costs
// tens of microseconds in a sandboxed container, the larger part of a reading). Every other event
// goes out at once, and only whole lines are ever written: a crash loses at most the last
// window's samples, never half an event.
#ifndef VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_
#define VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "worker/events/worker_events.h"

namespace vramlab::worker {

class EventSink {
 public:
  static constexpr std::chrono::milliseconds kSampleBatchWindow{50};
  static constexpr size_t kSampleBatchBytes = 64 << 10;

  // Does not take ownership of `fd`.
  explicit EventSink(int fd) : fd_(fd) {}
  ~EventSink() { Flush(); }
  EventSink(const EventSink&) = delete;
  EventSink& operator=(const EventSink&) = delete;

  void Started(const WorkerStarted& started);
  void PhaseChange(const PhaseEvent& event);
  void Sample(const MemorySample& sample);
  void Step(const StepResult& step);
  void Oom(const OomReport& oom);
  void SweepPoint(const SweepPointResult& point);
  void Report(const FinalReport& report);
  void Notice(NoticeLevel level, const std::string& message);
  void Error(const WorkerError& error);

  // Writes `line` and a newline verbatim (fault injection writes malformed lines through this).
  void WriteRawLine(const std::string& line);
  // Writes the batched samples now.
  void Flush();

  // Lines handed to the sink: written, or (samples) batched to be written.
  int64_t lines_accepted() const { return lines_accepted_.load(std::memory_order_relaxed); }
  // False once a write failed (the reader went away); later events are dropped silently.
  bool healthy() const { return healthy_.load(std::memory_order_relaxed); }

 private:
  // `event` (built by the methods above, so never stamped with a rank) as one line.
  void Emit(const WorkerEvent& event, bool is_sample);
  // Appends `line` + newline to what goes out; writes unless it is a sample that may wait.
  void Append(const std::string& line, bool is_sample);
  void WriteAll(const std::string& data);

  const int fd_;
  std::mutex mu_;                                        // serializes whole lines
  std::string pending_;                                  // guarded by mu_: whole sample lines
  std::chrono::steady_clock::time_point pending_since_;  // guarded by mu_
  std::atomic<int64_t> lines_accepted_{0};
  std::atomic<bool> healthy_{true};
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_
