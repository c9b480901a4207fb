#include "server/engine/worker_threads.h"

#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using vramlab::v1::CPU;
using vramlab::v1::CUDA;
using vramlab::v1::ExperimentSpec;

ExperimentSpec Spec(int world_size, bool offload) {
  ExperimentSpec spec;
  spec.mutable_parallel()->set_world_size(world_size);
  spec.mutable_training()->mutable_optimizer()->set_offload_to_cpu(offload);
  return spec;
}

TEST(WorkerThreadsTest, CudaRanksShareTheCores) {
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(2, false)), 8);
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(3, false)), 5);
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(64, false)), 1);
}

TEST(WorkerThreadsTest, OffloadTakesTheWholeShare) {
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(2, true)), 8);
  EXPECT_EQ(IntraOpThreads(2, CUDA, 0, Spec(2, true)), 1);
  EXPECT_EQ(IntraOpThreads(1, CPU, 1, Spec(1, true)), 1);
  EXPECT_EQ(IntraOpThreads(16, CPU, 4, Spec(2, true)), 4);
}

TEST(WorkerThreadsTest, OneCudaProcessKeepsLibTorchsDefault) {
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(0, false)), std::nullopt);
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(1, false)), std::nullopt);
  EXPECT_EQ(IntraOpThreads(16, CUDA, 0, Spec(1, true)), std::nullopt);
}

TEST(WorkerThreadsTest, CpuSlotsShareTheCores) {
  // Every rank takes a slot, so the slots' share holds for parallel runs too.
  EXPECT_EQ(IntraOpThreads(16, CPU, 4, Spec(1, false)), 4);
  EXPECT_EQ(IntraOpThreads(16, CPU, 4, Spec(2, false)), 4);
  EXPECT_EQ(IntraOpThreads(2, CPU, 4, Spec(1, false)), 1);
  EXPECT_EQ(IntraOpThreads(0, CPU, 1, Spec(1, false)), 1);
}

}  // namespace
}  // namespace vramlab::server
