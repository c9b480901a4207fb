#include "worker/optim/host_thread_pool.h"

#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

TEST(HostThreadPoolTest, RunsEveryTaskOnce) {
  std::vector<std::atomic<int>> runs(7);
  RunOnHostThreads(7, [&](int t) { runs[t].fetch_add(1); });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(HostThreadPoolTest, CapLowersTheCountOnItsThreadOnlyAndIsUndoneAtScopeEnd) {
  const int uncapped = std::max(1, at::get_num_threads());
  EXPECT_EQ(HostThreadsForThisThread(), uncapped);
  {
    HostThreadCap cap(1);
    EXPECT_EQ(HostThreadsForThisThread(), 1);
    int other_thread = 0, other_thread_uncapped = -1;
    std::thread([&] {
      other_thread = HostThreadsForThisThread();
      other_thread_uncapped = std::max(1, at::get_num_threads());
    }).join();
    EXPECT_EQ(other_thread, other_thread_uncapped);
    {
      HostThreadCap wider(uncapped + 5);  // a cap never raises the count
      EXPECT_EQ(HostThreadsForThisThread(), uncapped);
    }
    EXPECT_EQ(HostThreadsForThisThread(), 1);
  }
  EXPECT_EQ(HostThreadsForThisThread(), uncapped);
  HostThreadCap zero(0);  // at least one thread
  EXPECT_EQ(HostThreadsForThisThread(), 1);
}

}  // namespace
}  // namespace vramlab::worker::optim_internal
