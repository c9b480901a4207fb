#include "worker/optim/host_thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

// Runs `tasks` tasks on `workers` threads and returns, per task, how often it ran, and the
// distinct threads that ran any; each task sleeps a little so that the pool's threads all wake
// before the tasks are gone.
struct RunRecord {
  std::vector<int> runs;
  std::set<std::thread::id> threads;
  int most_at_once = 0;
};

RunRecord Record(int workers, int tasks) {
  RunRecord record;
  record.runs.assign(tasks, 0);
  std::mutex mu;
  std::atomic<int> running{0};
  RunOnHostThreads(workers, tasks, [&](int t) {
    const int now = ++running;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      std::lock_guard<std::mutex> lock(mu);
      ++record.runs[t];
      record.threads.insert(std::this_thread::get_id());
      record.most_at_once = std::max(record.most_at_once, now);
    }
    --running;
  });
  return record;
}

TEST(HostThreadPool, RunsEveryTaskOnceWithMoreTasksThanWorkers) {
  const RunRecord record = Record(/*workers=*/3, /*tasks=*/40);
  for (int t = 0; t < 40; ++t) EXPECT_EQ(record.runs[t], 1) << "task " << t;
  EXPECT_LE(record.threads.size(), 3u);
  EXPECT_GE(record.threads.size(), 2u);  // 40 sleeping tasks: the pool's threads took some
  EXPECT_LE(record.most_at_once, 3);
}

TEST(HostThreadPool, AnEarlierLargerRunDoesNotWidenALaterOne) {
  Record(/*workers=*/6, /*tasks=*/24);  // starts five pool threads
  const RunRecord record = Record(/*workers=*/2, /*tasks=*/30);
  for (int t = 0; t < 30; ++t) EXPECT_EQ(record.runs[t], 1) << "task " << t;
  EXPECT_LE(record.threads.size(), 2u);
  EXPECT_LE(record.most_at_once, 2);
}

TEST(HostThreadPool, OneWorkerRunsEverythingOnTheCaller) {
  const RunRecord record = Record(/*workers=*/1, /*tasks=*/5);
  for (int t = 0; t < 5; ++t) EXPECT_EQ(record.runs[t], 1);
  ASSERT_EQ(record.threads.size(), 1u);
  EXPECT_EQ(*record.threads.begin(), std::this_thread::get_id());
}

// A worker that is slow (here: its first task blocks until the others are all taken) does not
// hold the other tasks: they run on the remaining threads.
TEST(HostThreadPool, TasksGoToTheThreadsThatAreFree) {
  std::atomic<int> done{0};
  std::atomic<bool> first_started{false}, others_ran_meanwhile{false};
  RunOnHostThreads(/*workers=*/2, /*tasks=*/20, [&](int t) {
    if (t == 0) {
      first_started = true;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < 19 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      others_ran_meanwhile = done.load() == 19;
    }
    ++done;
  });
  EXPECT_TRUE(first_started);
  EXPECT_TRUE(others_ran_meanwhile);
  EXPECT_EQ(done.load(), 20);
}

}  // namespace
}  // namespace vramlab::worker::optim_internal
