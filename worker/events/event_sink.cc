#include "worker/events/event_sink.h"

#include <cerrno>

#include <unistd.h>

#include "worker/events/event_json.h"

namespace vramlab::worker {

void EventSink::Started(const WorkerStarted& started) { Emit("started", ToJson(started)); }
void EventSink::PhaseChange(const PhaseEvent& event) { Emit("phase", ToJson(event)); }
void EventSink::Sample(const MemorySample& sample) {
  nlohmann::json event = nlohmann::json::object();
  event["sample"] = ToJson(sample);
  Append(event.dump(), /*is_sample=*/true);
}
void EventSink::Step(const StepResult& step) { Emit("step", ToJson(step)); }
void EventSink::Oom(const OomReport& oom) { Emit("oom", ToJson(oom)); }
void EventSink::SweepPoint(const SweepPointResult& point) { Emit("sweepPoint", ToJson(point)); }
void EventSink::Report(const FinalReport& report) { Emit("report", ToJson(report)); }
void EventSink::Notice(NoticeLevel level, const std::string& message) {
  Emit("notice", NoticeJson(level, message));
}
void EventSink::Error(const WorkerError& error) { Emit("error", ToJson(error)); }

void EventSink::Emit(const char* payload_key, const nlohmann::json& body) {
  nlohmann::json event = nlohmann::json::object();
  event[payload_key] = body;
  // Allocator messages may carry bytes that are not UTF-8; JSON must be, so they are replaced.
  Append(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), /*is_sample=*/false);
}

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
