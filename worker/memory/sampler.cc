#include "worker/memory/sampler.h"

#include <cstdio>
#include <ctime>

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
  sink_->Flush();
}

void Sampler::WaitForFirstSample() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return first_written_ || stop_; });
}

double Sampler::overhead_ratio() const {
  const int64_t wall = wall_ns_.load(std::memory_order_relaxed);
  return wall > 0 ? static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) /
                        static_cast<double>(wall)
                  : 0.0;
}

double Sampler::cpu_ratio() const {
  const int64_t wall = wall_ns_.load(std::memory_order_relaxed);
  return wall > 0 ? static_cast<double>(cpu_ns_.load(std::memory_order_relaxed)) /
                        static_cast<double>(wall)
                  : 0.0;
}

std::string Sampler::CostSummary() const {
  const int64_t n = samples_.load(std::memory_order_relaxed);
  const int64_t driver_reads = driver_reads_.load(std::memory_order_relaxed);
  auto mean_us = [](int64_t total_ns, int64_t count) {
    return count > 0 ? static_cast<double>(total_ns) / static_cast<double>(count) / 1000.0 : 0.0;
  };
  char line[384];
  std::snprintf(line, sizeof(line),
                "%lld samples every %lld ms, per sample %.1f us allocator + %.1f us emit, "
                "driver view read %lld times at %.1f us; busy %.3f%% of wall, CPU %.3f%% of wall",
                static_cast<long long>(n), static_cast<long long>(interval_.count()),
                mean_us(allocator_ns_.load(std::memory_order_relaxed), n),
                mean_us(emit_ns_.load(std::memory_order_relaxed), n),
                static_cast<long long>(driver_reads),
                mean_us(driver_ns_.load(std::memory_order_relaxed), driver_reads),
                overhead_ratio() * 100, cpu_ratio() * 100);
  return line;
}

namespace {

// CPU time this thread has used: its cost to the machine, without the time it waited on locks.
int64_t ThreadCpuNanoseconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void Sampler::Run() {
  using Clock = std::chrono::steady_clock;
  const int64_t cpu_started = ThreadCpuNanoseconds();
  const Clock::time_point started = Clock::now();
  Clock::time_point next = started;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const Clock::time_point begin = Clock::now();
    ReadCost cost;
    const MemorySample sample = monitor_->Read(/*free_blocks=*/false, &cost);
    const Clock::time_point read = Clock::now();
    sink_->Sample(sample);
    if (observer_) observer_(sample);
    const Clock::time_point end = Clock::now();
    allocator_ns_.fetch_add(cost.allocator_ns, std::memory_order_relaxed);
    driver_ns_.fetch_add(cost.driver_ns, std::memory_order_relaxed);
    if (cost.driver_ns > 0) driver_reads_.fetch_add(1, std::memory_order_relaxed);
    emit_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - read).count(),
                       std::memory_order_relaxed);
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count(),
                       std::memory_order_relaxed);
    wall_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(end - started).count(),
                   std::memory_order_relaxed);
    cpu_ns_.store(ThreadCpuNanoseconds() - cpu_started, std::memory_order_relaxed);
    samples_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    if (!first_written_) {
      sink_->Flush();  // whoever waits for the first sample wants it out, not batched
      first_written_ = true;
      cv_.notify_all();
    }
    // Fixed-rate schedule; after a stall, skip ahead instead of bursting to catch up.
    next += interval_;
    if (next < end) next = end + interval_;
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
  wall_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count(),
      std::memory_order_relaxed);
}

}  // namespace vramlab::worker
