#include "server/engine/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

// One process would need 10 GiB; one rank of the parallel run 3 GiB.
vramlab::v1::MemoryEstimate Estimate() {
  vramlab::v1::MemoryEstimate estimate;
  estimate.set_predicted_peak_bytes(10 * kGiB);
  estimate.mutable_parallel()->set_predicted_peak_bytes(3 * kGiB);
  return estimate;
}

vramlab::v1::ExperimentSpec Spec(int world_size) {
  vramlab::v1::ExperimentSpec spec;
  if (world_size > 0) spec.mutable_parallel()->set_world_size(world_size);
  return spec;
}

TEST(AdmissionTest, OneProcessIsAdmittedByItsWholePeak) {
  absl::Status refused = CheckFitsDevice(Estimate(), Spec(0), vramlab::v1::CUDA, 8 * kGiB);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("estimated peak of 10.0 GiB"));
}

TEST(AdmissionTest, AParallelRunIsAdmittedByOneRanksPeakOnEachGpu) {
  EXPECT_TRUE(CheckFitsDevice(Estimate(), Spec(2), vramlab::v1::CUDA, 8 * kGiB).ok());
  EXPECT_TRUE(CheckFitsDevice(Estimate(), Spec(8), vramlab::v1::CUDA, 8 * kGiB).ok());
  absl::Status small = CheckFitsDevice(Estimate(), Spec(2), vramlab::v1::CUDA, 3 * kGiB);
  EXPECT_EQ(small.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(small.message()), HasSubstr("estimated peak of 3.0 GiB per rank"));
}

TEST(AdmissionTest, RanksOnTheCpuDeviceShareTheHostsMemory) {
  // 8 GiB of host memory, 7.5 GiB usable: two ranks of 3 GiB fit, three do not.
  EXPECT_TRUE(CheckFitsDevice(Estimate(), Spec(2), vramlab::v1::CPU, 8 * kGiB).ok());
  absl::Status three = CheckFitsDevice(Estimate(), Spec(3), vramlab::v1::CPU, 8 * kGiB);
  EXPECT_EQ(three.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(three.message()), HasSubstr("per rank (3 ranks share it: 9.0 GiB)"));
}

TEST(AdmissionTest, TheMemoryLimitCapsEachRank) {
  vramlab::v1::ExperimentSpec spec = Spec(3);
  spec.mutable_memory()->set_device_memory_limit_bytes(2 * kGiB);
  EXPECT_TRUE(CheckFitsDevice(Estimate(), spec, vramlab::v1::CPU, 8 * kGiB).ok());
}

}  // namespace
}  // namespace vramlab::server
