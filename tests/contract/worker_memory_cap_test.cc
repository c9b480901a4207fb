// The CPU worker caps its own data segment at VRAMLAB_HOST_MEMORY_LIMIT_BYTES (the daemon passes
// host RAM less a margin): a model larger than the cap ends in an out-of-memory answer instead of
// growing until the host swaps, and a model that fits runs as before.
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/contract/worker_process.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;

// Qwen2.5-1.5B's shapes on the CPU: 6.2 GB of float32 weights alone.
constexpr char kLargeSpec[] =
    R"({"name":"large","model":{"preset":"qwen2.5-1.5b"},"training":{"microBatchSize":1,)"
    R"("seqLen":8,"steps":1,"dtype":"FLOAT32"},"device":"CPU"})";
constexpr char kTinySpec[] =
    R"({"name":"tiny","model":{"preset":"tiny"},"training":{"microBatchSize":1,)"
    R"("seqLen":8,"steps":1,"dtype":"FLOAT32"},"device":"CPU"})";

class WorkerMemoryCapTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("VRAMLAB_HOST_MEMORY_LIMIT_BYTES"); }
};

TEST_F(WorkerMemoryCapTest, AModelLargerThanTheCapEndsOutOfMemory) {
  setenv("VRAMLAB_HOST_MEMORY_LIMIT_BYTES", std::to_string(int64_t{2} << 30).c_str(), 1);
  WorkerProcess run = RunWorkerProcess(kLargeSpec);
  EXPECT_EQ(run.exit_status, 3) << run.output;  // kExitOutOfMemory
  EXPECT_THAT(run.output, HasSubstr("\"oom\""));
}

TEST_F(WorkerMemoryCapTest, AModelThatFitsRunsUnderTheCap) {
  setenv("VRAMLAB_HOST_MEMORY_LIMIT_BYTES", std::to_string(int64_t{2} << 30).c_str(), 1);
  WorkerProcess run = RunWorkerProcess(kTinySpec);
  EXPECT_EQ(run.exit_status, 0) << run.output;
}

}  // namespace
}  // namespace vramlab::testing
