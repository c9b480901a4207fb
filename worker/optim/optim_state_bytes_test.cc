// Optimizer state bytes per mode, exact to the formula, both as reported (DeviceStateBytes /
// HostStateBytes) and as measured by the counting CPU allocator across the first step (which is
// where state is created; later steps must allocate nothing that stays).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <tuple>
#include <vector>

#include "worker/memory/counting_cpu_allocator.h"
#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using optim_testing::NamedParams;

// Spans the interesting cases: below the 8-bit threshold (4095), exactly at it (4096), a partial
// last quantization block (5000), several host thread tasks (70000).
const std::vector<int64_t> kSizes = {4095, 4096, 5000, 70000, 3};

int64_t Elements(const std::vector<int64_t>& sizes) {
  int64_t n = 0;
  for (int64_t s : sizes) n += s;
  return n;
}

// The documented formula (worker/optim/README.md).
int64_t ExpectedStateBytes(OptimizerKind kind, torch::ScalarType dtype) {
  const int64_t param_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  switch (kind) {
    case OptimizerKind::kAdamW:
      return 2 * param_bytes * Elements(kSizes);
    case OptimizerKind::kAdamWFp32Master:
      return 12 * Elements(kSizes);
    case OptimizerKind::kSgd:
      return param_bytes * Elements(kSizes);
    case OptimizerKind::kAdamW8bit: {
      // Two code books of 256 values and 255 midpoints (fp32), then per tensor either fp32
      // moments (fewer than 4096 elements) or 2 uint8 codes per element + 2 fp32 scales per
      // block of 256.
      int64_t bytes = 2 * (256 + 255) * 4;
      for (int64_t n : kSizes) bytes += n < 4096 ? 8 * n : 2 * n + 2 * 4 * ((n + 255) / 256);
      return bytes;
    }
  }
  return -1;
}

class StateBytesTest
    : public ::testing::TestWithParam<std::tuple<OptimizerKind, torch::ScalarType, bool>> {
 protected:
  void SetUp() override { allocator_ = CountingCpuAllocator::Install(); }
  CountingCpuAllocator* allocator_ = nullptr;
};

TEST_P(StateBytesTest, ReportedAndMeasuredBytesMatchTheFormula) {
  const auto& [kind, dtype, offload] = GetParam();
  const int64_t expected = ExpectedStateBytes(kind, dtype);
  NamedParams params = optim_testing::SyntheticParams(kSizes, dtype, 1);
  OptimizerOptions options = optim_testing::Options(kind);
  options.offload_to_cpu = offload;
  auto optimizer = MakeOptimizer(params, options);
  optim_testing::SetGradients(params, 2);

  const int64_t before = allocator_->allocated_bytes();
  optimizer->Step();
  EXPECT_EQ(allocator_->allocated_bytes() - before, expected);
  EXPECT_EQ(optimizer->DeviceStateBytes(), offload ? 0 : expected);
  EXPECT_EQ(optimizer->HostStateBytes(), offload ? expected : 0);

  optim_testing::SetGradients(params, 3);  // replaces the gradients with same-sized ones
  const int64_t before_second = allocator_->allocated_bytes();
  optimizer->Step();
  EXPECT_EQ(allocator_->allocated_bytes() - before_second, 0);
  EXPECT_EQ(optimizer->DeviceStateBytes() + optimizer->HostStateBytes(), expected);
}

INSTANTIATE_TEST_SUITE_P(Modes, StateBytesTest,
                         ::testing::Combine(::testing::ValuesIn(optim_testing::AllKinds()),
                                            ::testing::Values(torch::kFloat, torch::kBFloat16),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name =
                               OptimizerKindName(std::get<0>(info.param)) + "_" +
                               (std::get<1>(info.param) == torch::kFloat ? "fp32" : "bf16") +
                               (std::get<2>(info.param) ? "_offload" : "");
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// In-backward mode on a parameter set: after backward the gradients are gone, and what stays
// allocated is exactly the parameters plus the state.
TEST(InBackwardMemoryTest, NoGradientSurvivesBackward) {
  CountingCpuAllocator* allocator = CountingCpuAllocator::Install();
  NamedParams params = optim_testing::SyntheticParams({4096, 70000}, torch::kFloat, 1);
  OptimizerOptions options = optim_testing::Options(OptimizerKind::kAdamW);
  options.in_backward = true;
  auto optimizer = MakeOptimizer(params, options);
  const int64_t before = allocator->allocated_bytes();
  {
    torch::Tensor loss = torch::zeros({});
    for (const auto& [name, p] : params) loss = loss + (p * p).sum();
    loss.backward();
  }
  for (const auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
  EXPECT_EQ(allocator->allocated_bytes() - before, optimizer->DeviceStateBytes());
  EXPECT_EQ(optimizer->DeviceStateBytes(), 2 * 4 * (4096 + 70000));
}

}  // namespace
}  // namespace vramlab::worker
