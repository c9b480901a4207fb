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

TEST(AdmissionTest, EachRankOnTheCpuDeviceIsCheckedAgainstItsOwnSlotsShare) {
  // A slot of 4 GiB (3.5 GiB usable): a rank of 3 GiB fits however many ranks there are, since
  // each has a slot of its own; the 10 GiB single process does not.
  EXPECT_TRUE(CheckFitsDevice(Estimate(), Spec(2), vramlab::v1::CPU, 4 * kGiB).ok());
  EXPECT_TRUE(CheckFitsDevice(Estimate(), Spec(4), vramlab::v1::CPU, 4 * kGiB).ok());
  absl::Status one = CheckFitsDevice(Estimate(), Spec(0), vramlab::v1::CPU, 4 * kGiB);
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      std::string(one.message()),
      HasSubstr(
          "does not fit this daemon's host memory share (CPU slot) of 4.0 GiB (3.5 GiB usable"));
  absl::Status small = CheckFitsDevice(Estimate(), Spec(2), vramlab::v1::CPU, 3 * kGiB);
  EXPECT_THAT(std::string(small.message()), HasSubstr("estimated peak of 3.0 GiB per rank"));
}

TEST(AdmissionTest, EveryPointOfAListSweepIsCheckedOnTheCpu) {
  vramlab::v1::MemoryEstimate estimate;
  estimate.set_predicted_peak_bytes(1 * kGiB);  // the first point
  for (auto [value, peak] : {std::pair{128, 1 * kGiB}, {256, 2 * kGiB}, {512, 6 * kGiB}}) {
    auto* point = estimate.add_points();
    point->set_value(value);
    point->set_peak_allocated_bytes(peak);
  }
  vramlab::v1::ExperimentSpec spec;
  for (int value : {128, 256, 512}) spec.mutable_sweep()->add_values(value);
  absl::Status refused = CheckFitsDevice(estimate, spec, vramlab::v1::CPU, 4 * kGiB);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("estimated peak of 6.0 GiB at the sweep's point seq_len = 512"));
  // A memory limit bounds every point; on a GPU the later points end as the sweep's OOM point.
  vramlab::v1::ExperimentSpec capped = spec;
  capped.mutable_memory()->set_device_memory_limit_bytes(3 * kGiB);
  EXPECT_TRUE(CheckFitsDevice(estimate, capped, vramlab::v1::CPU, 4 * kGiB).ok());
  EXPECT_TRUE(CheckFitsDevice(estimate, spec, vramlab::v1::CUDA, 4 * kGiB).ok());
  // A search runs past what fits by design: only its first point must fit.
  vramlab::v1::ExperimentSpec search = spec;
  search.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  EXPECT_TRUE(CheckFitsDevice(estimate, search, vramlab::v1::CPU, 4 * kGiB).ok());
}

TEST(AdmissionTest, AWorkerOnACpuSlotIsCappedAtTheSlotsUsableShare) {
  const Slot slot{0, "cpu", 8 * kGiB, ""};
  EXPECT_EQ(WorkerHostMemoryLimit(vramlab::v1::CPU, slot, 32 * kGiB), UsableDeviceBytes(8 * kGiB));
  EXPECT_EQ(WorkerHostMemoryLimit(vramlab::v1::CUDA, slot, 32 * kGiB),
            UsableDeviceBytes(32 * kGiB));
}

TEST(AdmissionTest, TheMemoryLimitCapsEachRank) {
  vramlab::v1::ExperimentSpec spec = Spec(3);
  spec.mutable_memory()->set_device_memory_limit_bytes(2 * kGiB);
  EXPECT_TRUE(CheckFitsDevice(Estimate(), spec, vramlab::v1::CPU, 8 * kGiB).ok());
}

}  // namespace
}  // namespace vramlab::server
