#include "worker/optim/host_thread_pool.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

class HostThreadPool {
 public:
  void Run(int tasks, const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> one_run_at_a_time(run_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(threads_.size()) < tasks - 1) {
        threads_.emplace_back([this] { Work(); });
      }
      task_ = &task;
      tasks_ = tasks;
      next_task_ = 1;
      unfinished_ = tasks - 1;
      ++generation_;
    }
    start_.notify_all();
    task(0);
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [this] { return unfinished_ == 0; });
    task_ = nullptr;
  }

 private:
  void Work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      while (next_task_ < tasks_) {
        const int t = next_task_++;
        const std::function<void(int)>* task = task_;
        lock.unlock();
        (*task)(t);
        lock.lock();
        if (--unfinished_ == 0) finished_.notify_one();
      }
    }
  }

  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable start_, finished_;
  std::vector<std::thread> threads_;              // guarded by mu_; never joined (process lifetime)
  const std::function<void(int)>* task_ = nullptr;  // guarded by mu_
  int tasks_ = 0, next_task_ = 0, unfinished_ = 0;  // guarded by mu_
  uint64_t generation_ = 0;                         // guarded by mu_
};

}  // namespace

void RunOnHostThreads(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 1) {
    if (tasks == 1) task(0);
    return;
  }
  // Leaked on purpose: its threads wait forever, and a static destructor would have to join them.
  static HostThreadPool* pool = new HostThreadPool();
  pool->Run(tasks, task);
}

}  // namespace vramlab::worker::optim_internal
