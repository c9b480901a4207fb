#include "worker/optim/host_thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

class HostThreadPool {
 public:
  void Run(int workers, int tasks, const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> one_run_at_a_time(run_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(threads_.size()) < workers - 1) {
        const int id = static_cast<int>(threads_.size());
        threads_.emplace_back([this, id] { Work(id); });
      }
      task_ = &task;
      tasks_ = tasks;
      next_task_ = 0;
      unfinished_ = tasks;
      pool_workers_ = workers - 1;
      ++generation_;
    }
    start_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    TakeTasks(lock);
    finished_.wait(lock, [this] { return unfinished_ == 0; });
    task_ = nullptr;
  }

 private:
  // Runs tasks until none is left to take; `lock` holds mu_ on entry and on return.
  void TakeTasks(std::unique_lock<std::mutex>& lock) {
    while (next_task_ < tasks_) {
      const int t = next_task_++;
      const std::function<void(int)>* task = task_;
      lock.unlock();
      (*task)(t);
      lock.lock();
      if (--unfinished_ == 0) finished_.notify_one();
    }
  }

  // Pool thread `id` takes part in a run only if id < pool_workers_, so a run never has more
  // threads working than it asked for, whatever earlier runs started.
  void Work(int id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (id < pool_workers_) TakeTasks(lock);
    }
  }

  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable start_, finished_;
  std::vector<std::thread> threads_;  // guarded by mu_; never joined (process lifetime)
  const std::function<void(int)>* task_ = nullptr;  // guarded by mu_
  int tasks_ = 0, next_task_ = 0, unfinished_ = 0;  // guarded by mu_
  int pool_workers_ = 0;                            // guarded by mu_: pool threads of this run
  uint64_t generation_ = 0;                         // guarded by mu_
};

}  // namespace

void RunOnHostThreads(int workers, int tasks, const std::function<void(int)>& task) {
  if (workers <= 1 || tasks <= 1) {
    for (int t = 0; t < tasks; ++t) task(t);
    return;
  }
  // Leaked on purpose: its threads wait forever, and a static destructor would have to join them.
  static HostThreadPool* pool = new HostThreadPool();
  pool->Run(std::min(workers, tasks), tasks, task);
}

}  // namespace vramlab::worker::optim_internal
