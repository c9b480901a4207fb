// The fused 8-bit AdamW kernel (kernels/optim) against the 8-bit rule's ATen ops on the same CUDA
// device: from the same parameters, gradients and state, step after step, the parameters agree
// within one rounding of their dtype and the requantized moments within one quantization step.
// Compiled only when LibTorch has CUDA and the worker was built with kernels/optim (the GPU host:
// scripts/gpu-build.sh --tests); otherwise this binary has no tests.
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(VRAMLAB_WITH_CUDA) && defined(VRAMLAB_WITH_OPTIM_KERNELS)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "worker/optim/blockwise_quantizer.h"
#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"
#include "worker/optim/rules.h"
#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {
namespace {

const torch::Device kCuda(torch::kCUDA, 0);
constexpr double kLr = 1e-3;  // optim_testing::Options' default

// Fewer than 4096 elements (fp32 moments), exactly one block row, a short tail block, and a tensor
// of several hundred blocks.
const std::vector<int64_t> kSizes = {3, 4095, 4096, 5000, 70000, (int64_t{1} << 20) + 77};

// One rounding step of `dtype` at the magnitude of `x` (elementwise, float64).
torch::Tensor RoundingStep(const torch::Tensor& x, torch::ScalarType dtype) {
  const int mantissa_bits = dtype == torch::kBFloat16 ? 7 : 23;
  torch::Tensor magnitude = x.to(torch::kDouble).abs().clamp_min(1e-30);
  return torch::pow(2.0, torch::floor(torch::log2(magnitude)) - mantissa_bits);
}

struct Comparison {
  int64_t params_outside_one_rounding = 0;
  int64_t codes_more_than_one_apart = 0;
  int64_t codes_differing = 0;
  int64_t codes = 0;
  double worst_absmax_relative = 0;
  double worst_fp32_moment_relative = 0;
};

// The largest |a - b| relative to b elementwise (`per_element`) or to max |b| (a moment that
// cancels to near 0 keeps only the rounding of its terms).
double WorstRelative(const torch::Tensor& a, const torch::Tensor& b, bool per_element) {
  torch::Tensor a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
  torch::Tensor scale = per_element ? b64.abs() : b64.abs().max().expand_as(b64);
  return ((a64 - b64).abs() / (scale + 1e-30)).max().item<double>();
}

void Compare(const torch::Tensor& fused_param, const torch::Tensor& aten_param,
             const std::vector<torch::Tensor>& fused_state,
             const std::vector<torch::Tensor>& aten_state, Comparison& c) {
  torch::Tensor diff = (fused_param.to(torch::kDouble) - aten_param.to(torch::kDouble)).abs();
  // At the larger of the two values, or of the learning rate (an update's scale: a parameter near
  // 0 gets the update's rounding, not its own).
  torch::Tensor larger =
      torch::max(fused_param.abs(), aten_param.abs()).to(torch::kDouble).clamp_min(kLr);
  // bf16: one rounding of the same fp32 result; fp32: the ops' own roundings, a few ulps.
  const double steps = fused_param.scalar_type() == torch::kBFloat16 ? 1 : 4;
  c.params_outside_one_rounding +=
      (diff > steps * RoundingStep(larger, fused_param.scalar_type())).sum().item<int64_t>();
  if (fused_state.size() == 4) {
    for (int k = 0; k < 2; ++k) {
      torch::Tensor code_diff =
          (fused_state[k].to(torch::kInt) - aten_state[k].to(torch::kInt)).abs();
      c.codes_more_than_one_apart += (code_diff > 1).sum().item<int64_t>();
      c.codes_differing += (code_diff > 0).sum().item<int64_t>();
      c.codes += code_diff.numel();
      c.worst_absmax_relative = std::max(
          c.worst_absmax_relative, WorstRelative(fused_state[k + 2], aten_state[k + 2], true));
    }
  } else {
    for (int k = 0; k < 2; ++k) {
      c.worst_fp32_moment_relative = std::max(c.worst_fp32_moment_relative,
                                              WorstRelative(fused_state[k], aten_state[k], false));
    }
  }
}

Comparison StepByStep(torch::ScalarType dtype, int steps) {
  const OptimizerOptions options = optim_testing::Options(OptimizerKind::kAdamW8bit, kLr);
  std::unique_ptr<UpdateRule> fused = MakeAdamW8bitRule(options, kSizes.size(), true);
  std::unique_ptr<UpdateRule> aten = MakeAdamW8bitRule(options, kSizes.size(), false);
  EXPECT_EQ(fused->MultiTensorPath(kCuda), "fused-cuda");
  EXPECT_EQ(aten->MultiTensorPath(kCuda), "");
  StatePlacement placement;
  placement.device = kCuda;
  torch::manual_seed(7);
  std::vector<torch::Tensor> fused_params, aten_params;
  std::vector<size_t> indices;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    fused_params.push_back(
        torch::randn({kSizes[i]}, torch::TensorOptions().device(kCuda)).to(dtype));
    aten_params.push_back(fused_params.back().clone());
    indices.push_back(i);
  }
  Comparison c;
  for (int step = 1; step <= steps; ++step) {
    std::vector<torch::Tensor> grads;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      // Gradient scales over six decades, so the moments use the whole dynamic map.
      const double scale = std::pow(10.0, -static_cast<double>(i % 6));
      grads.push_back(
          (torch::randn({kSizes[i]}, torch::TensorOptions().device(kCuda)) * scale).to(dtype));
      fused->EnsureState(i, fused_params[i], placement);
      aten->EnsureState(i, aten_params[i], placement);
      // The same input on both sides: the reference starts from the fused side's values.
      aten_params[i].copy_(fused_params[i]);
      for (size_t k = 0; k < fused->state(i).size(); ++k) {
        torch::Tensor target = aten->state(i)[k];
        target.copy_(fused->state(i)[k]);
      }
    }
    EXPECT_TRUE(fused->UpdateWhole(indices, fused_params, grads, step));
    for (size_t i = 0; i < kSizes.size(); ++i) {
      aten->UpdateRange(i, step, 0, aten_params[i], grads[i]);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
      Compare(fused_params[i], aten_params[i], fused->state(i), aten->state(i), c);
    }
  }
  return c;
}

TEST(FusedAdamW8bitTest, DeviceIsPresent) { ASSERT_TRUE(torch::cuda::is_available()); }

TEST(FusedAdamW8bitTest, MatchesTheAtenRuleStepByStep) {
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat}) {
    const Comparison c = StepByStep(dtype, 5);
    const std::string what = ShortDtypeName(dtype);
    EXPECT_EQ(c.params_outside_one_rounding, 0) << what;
    EXPECT_EQ(c.codes_more_than_one_apart, 0) << what;
    // A code differs only where the two fp32 results straddle a midpoint: a few in a million. A
    // systematic error (an encoding off by one) would move most of them.
    EXPECT_LE(c.codes_differing, c.codes / 1000)
        << what << ": " << c.codes_differing << " of " << c.codes;
    EXPECT_LE(c.worst_absmax_relative, 4e-6) << what;
    EXPECT_LE(c.worst_fp32_moment_relative, 4e-6) << what;
    std::printf("%s: %lld of %lld codes differ, absmax within %.2e, fp32 moments within %.2e\n",
                what.c_str(), static_cast<long long>(c.codes_differing),
                static_cast<long long>(c.codes), c.worst_absmax_relative,
                c.worst_fp32_moment_relative);
  }
}

TEST(FusedAdamW8bitTest, TheOptimizerUsesTheKernelOnCuda) {
  optim_testing::NamedParams params;
  for (const auto& [name, p] : optim_testing::SyntheticParams({5000, 300}, torch::kBFloat16, 1)) {
    params.emplace_back(name, p.detach().to(kCuda).set_requires_grad(true));
  }
  auto optimizer = MakeOptimizer(params, optim_testing::Options(OptimizerKind::kAdamW8bit));
  EXPECT_NE(optimizer->Describe().find("adamw-8bit fused-cuda"), std::string::npos)
      << optimizer->Describe();
}

}  // namespace
}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WITH_CUDA && VRAMLAB_WITH_OPTIM_KERNELS
