#include "worker/memory/sampler.h"

namespace vramlab::worker {

void Sampler::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Sampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::WaitForFirstSample() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return first_written_ || stop_; });
}

double Sampler::overhead_ratio() const {
  const int64_t wall = wall_ns_.load(std::memory_order_relaxed);
  return wall > 0 ? static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) / static_cast<double>(wall) : 0.0;
}

void Sampler::Run() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  Clock::time_point next = started;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const Clock::time_point begin = Clock::now();
    const MemorySample sample = monitor_->Read();
    sink_->Sample(sample);
    if (observer_) observer_(sample);
    const Clock::time_point end = Clock::now();
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count(),
                       std::memory_order_relaxed);
    wall_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(end - started).count(),
                   std::memory_order_relaxed);
    samples_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    if (!first_written_) {
      first_written_ = true;
      cv_.notify_all();
    }
    // Fixed-rate schedule; after a stall, skip ahead instead of bursting to catch up.
    next += interval_;
    if (next < end) next = end + interval_;
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
  wall_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count(),
                 std::memory_order_relaxed);
}

}  // namespace vramlab::worker
