// Writes WorkerEvent JSON lines to a file descriptor (stdout or the daemon's --events-fd).
//
// Thread-safety: every method may be called from any thread (the training loop and the sampler
// thread both write); a mutex keeps lines whole. Each line goes out with write(2), unbuffered, so
// a reader sees it at once and a crash never leaves half a buffered event behind.
#ifndef VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_
#define VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/events/worker_events.h"

namespace vramlab::worker {

class EventSink {
 public:
  // Does not take ownership of `fd`.
  explicit EventSink(int fd) : fd_(fd) {}
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

  // {"<payload_key>": body} as one line.
  void Emit(const char* payload_key, const nlohmann::json& body);
  // Writes `line` and a newline verbatim (fault injection writes malformed lines through this).
  void WriteRawLine(const std::string& line);

  int64_t lines_written() const { return lines_written_.load(std::memory_order_relaxed); }
  // False once a write failed (the reader went away); later events are dropped silently.
  bool healthy() const { return healthy_.load(std::memory_order_relaxed); }

 private:
  void WriteAll(const std::string& data);

  const int fd_;
  std::mutex mu_;  // serializes whole lines
  std::atomic<int64_t> lines_written_{0};
  std::atomic<bool> healthy_{true};
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_EVENTS_EVENT_SINK_H_
