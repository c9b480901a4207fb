// Test support: the checks the anatomy of the peak moment must pass on any device, shared by the
// CPU test (peak_moment_test.cc) and the CUDA one (peak_moment_cuda_test.cc).
#ifndef VRAMLAB_WORKER_TRAIN_TESTING_PEAK_MOMENT_CHECKS_H_
#define VRAMLAB_WORKER_TRAIN_TESTING_PEAK_MOMENT_CHECKS_H_

#include <cmath>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "worker/train/testing/captured_run.h"

namespace vramlab::worker::testing {

inline const char* const kCategoryKeys[] = {
    "weightsBytes",    "adapterWeightsBytes", "quantizationConstantsBytes",
    "gradientsBytes",  "optimizerStateBytes", "activationsBytes",
    "temporariesBytes"};

inline int64_t CategorySum(const nlohmann::json& categories) {
  int64_t sum = 0;
  for (const char* key : kCategoryKeys)
    sum += categories.contains(key) ? Int64(categories[key]) : 0;
  return sum;
}

// An anatomy's two moments: the categories at peak allocated sum to it, and it is the run's peak
// allocated within `tolerance` (a fraction; 0 demands equality); no category is negative; the
// cache at peak reserved is reserved - allocated there, and that reserved is the run's peak
// reserved within `tolerance`.
inline void ExpectPeakMomentsAddUp(const nlohmann::json& anatomy, double tolerance) {
  ASSERT_TRUE(anatomy.contains("atPeakAllocated")) << anatomy.dump();
  ASSERT_TRUE(anatomy.contains("atPeakReserved")) << anatomy.dump();
  const nlohmann::json& moment = anatomy["atPeakAllocated"];
  const int64_t at_peak = Int64(moment["allocatedBytes"]);
  const int64_t peak = Int64(anatomy["peakAllocatedBytes"]);
  EXPECT_EQ(CategorySum(moment["categories"]), at_peak) << moment.dump();
  EXPECT_LE(std::abs(static_cast<double>(at_peak - peak)), tolerance * static_cast<double>(peak))
      << "at peak " << at_peak << ", peak allocated " << peak;
  for (const char* key : kCategoryKeys) {
    if (moment["categories"].contains(key)) EXPECT_GE(Int64(moment["categories"][key]), 0) << key;
  }
  const nlohmann::json& reserved = anatomy["atPeakReserved"];
  EXPECT_EQ(Int64(reserved["allocatorCacheBytes"]),
            Int64(reserved["reservedBytes"]) - Int64(reserved["allocatedBytes"]));
  const int64_t peak_reserved = Int64(anatomy["peakReservedBytes"]);
  EXPECT_LE(std::abs(static_cast<double>(Int64(reserved["reservedBytes"]) - peak_reserved)),
            tolerance * static_cast<double>(peak_reserved))
      << reserved.dump();
}

}  // namespace vramlab::worker::testing

#endif  // VRAMLAB_WORKER_TRAIN_TESTING_PEAK_MOMENT_CHECKS_H_
