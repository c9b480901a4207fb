#include "worker/memory/counting_cpu_allocator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/memory/oom.h"

namespace vramlab::worker {
namespace {

TEST(CountingCpuAllocatorTest, CountsEveryByteOfATensor) {
  CountingCpuAllocator* allocator = CountingCpuAllocator::Install();
  const int64_t before = allocator->allocated_bytes();
  {
    // DESIGN.md's measurement: weight 1024x1024 + bias 1024, fp32.
    torch::nn::Linear linear(1024, 1024);
    EXPECT_EQ(allocator->allocated_bytes() - before, 4198400);
  }
  EXPECT_EQ(allocator->allocated_bytes(), before);
}

TEST(CountingCpuAllocatorTest, TracksThePeakAndResetsIt) {
  CountingCpuAllocator* allocator = CountingCpuAllocator::Install();
  allocator->ResetPeak();
  const int64_t base = allocator->allocated_bytes();
  { torch::Tensor t = torch::empty({1 << 20}, torch::kUInt8); }
  EXPECT_EQ(allocator->peak_bytes(), base + (1 << 20));
  allocator->ResetPeak();
  EXPECT_EQ(allocator->peak_bytes(), base);
}

TEST(CountingCpuAllocatorTest, EnforcesTheLimitWithAnOutOfMemoryError) {
  CountingCpuAllocator* allocator = CountingCpuAllocator::Install();
  const int64_t base = allocator->allocated_bytes();
  allocator->SetLimit(base + 1000);
  torch::Tensor fits = torch::empty({600}, torch::kUInt8);
  try {
    torch::Tensor too_much = torch::empty({500}, torch::kUInt8);
    allocator->SetLimit(0);
    FAIL() << "500 bytes more must not fit under the limit";
  } catch (const c10::OutOfMemoryError& e) {
    allocator->SetLimit(0);
    EXPECT_TRUE(IsOutOfMemory(e));
    EXPECT_EQ(RequestedBytesFromMessage(e.what()), 500);
    EXPECT_EQ(allocator->last_refused_bytes(), 500);
    EXPECT_EQ(allocator->free_at_last_refusal(), 400);
  }
  EXPECT_EQ(allocator->allocated_bytes(), base + 600) << "a refused request must not stay counted";
}

}  // namespace
}  // namespace vramlab::worker
