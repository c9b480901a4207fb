#include "worker/events/event_sink.h"

#include <cerrno>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "schema/vramlab_v1.plain_json.h"

namespace vramlab::worker {
namespace {

// The line of `event`: the generated writer's object (keys in nlohmann's sorted order), dumped
// compact. Allocator messages may carry bytes that are not UTF-8; JSON must be, so they are
// replaced.
std::string LineOf(const WorkerEvent& event) {
  return plain::ToJson(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void EventSink::Started(const WorkerStarted& started) {
  WorkerEvent event;
  event.started = started;
  event.has_started = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::PhaseChange(const PhaseEvent& phase) {
  WorkerEvent event;
  event.phase = phase;
  event.phase.has_memory = true;
  event.has_phase = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Sample(const MemorySample& sample) {
  WorkerEvent event;
  event.sample = sample;
  event.has_sample = true;
  Emit(event, /*is_sample=*/true);
}

void EventSink::Step(const StepResult& step) {
  WorkerEvent event;
  event.step = step;
  event.has_step = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Oom(const OomReport& oom) {
  WorkerEvent event;
  event.oom = oom;
  event.oom.has_memory = true;
  event.has_oom = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::SweepPoint(const SweepPointResult& point) {
  WorkerEvent event;
  event.sweep_point = point;
  event.sweep_point.has_anatomy = true;
  event.has_sweep_point = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Report(const FinalReport& report) {
  WorkerEvent event;
  event.report = report;
  event.report.has_anatomy = true;
  for (SweepPointResult& point : event.report.sweep_points) point.has_anatomy = true;
  event.has_report = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Notice(NoticeLevel level, const std::string& message) {
  WorkerEvent event;
  event.notice.level = level;
  event.notice.message = message;
  event.has_notice = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Error(const WorkerError& error) {
  WorkerEvent event;
  event.error = error;
  event.has_error = true;
  Emit(event, /*is_sample=*/false);
}

void EventSink::Emit(const WorkerEvent& event, bool is_sample) { Append(LineOf(event), is_sample); }

void EventSink::WriteRawLine(const std::string& line) { Append(line, /*is_sample=*/false); }

void EventSink::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  WriteAll(pending_);
  pending_.clear();
}

void EventSink::Append(const std::string& line, bool is_sample) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.empty()) pending_since_ = now;
  pending_ += line;
  pending_ += '\n';
  lines_accepted_.fetch_add(1, std::memory_order_relaxed);
  if (is_sample && now - pending_since_ < kSampleBatchWindow && pending_.size() < kSampleBatchBytes)
    return;
  WriteAll(pending_);
  pending_.clear();
}

void EventSink::WriteAll(const std::string& data) {
  if (data.empty() || !healthy_.load(std::memory_order_relaxed)) return;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      healthy_.store(false, std::memory_order_relaxed);
      return;
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace vramlab::worker
