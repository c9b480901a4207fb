// The CUDA paths of the optimizers (fused AdamW, the grouped fp32-master update, foreach SGD,
// 8-bit ranges, pinned-memory offload, in-backward hooks on the device thread) against the CPU
// implementation, which the other optim tests check against HF and float64 references. Compiled
// only when LibTorch has CUDA (the GPU host); a CPU-only build has no tests in this binary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(VRAMLAB_WITH_CUDA)

#include <torch/version.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using optim_testing::NamedParams;

NamedParams ToDevice(const NamedParams& params, const torch::Device& device) {
  NamedParams out;
  for (const auto& [name, p] : params) {
    // clone(): a copy even when `p` is already on `device`.
    out.emplace_back(name, p.detach().to(device).clone().set_requires_grad(true));
  }
  return out;
}

void CopyGradients(const NamedParams& from, const NamedParams& to) {
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].second.mutable_grad() = from[i].second.grad().to(to[i].second.device());
  }
}

// Runs `steps` steps of `options` on CPU and CUDA copies of the same parameters and gradients;
// returns the largest difference of any parameter.
double CpuVsCudaDifference(OptimizerOptions options, const std::vector<int64_t>& sizes,
                           torch::ScalarType dtype, int steps) {
  NamedParams cpu = optim_testing::SyntheticParams(sizes, dtype, 1);
  NamedParams cuda = ToDevice(cpu, torch::kCUDA);
  OptimizerOptions cpu_options = options;
  cpu_options.offload_to_cpu = false;
  auto cpu_optimizer = MakeOptimizer(cpu, cpu_options);
  auto cuda_optimizer = MakeOptimizer(cuda, options);
  for (int t = 0; t < steps; ++t) {
    optim_testing::SetGradients(cpu, 10 + t);
    CopyGradients(cpu, cuda);
    cpu_optimizer->Step();
    cuda_optimizer->Step();
  }
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    worst = std::max(worst, optim_testing::MaxAbsDiff(cpu[i].second, cuda[i].second.cpu()));
  }
  return worst;
}

const std::vector<int64_t> kSizes = {4095, 5000, 70000, 3};

TEST(CudaOptimizerTest, DeviceIsPresent) { ASSERT_TRUE(torch::cuda::is_available()); }

TEST(CudaOptimizerTest, Fp32KindsMatchTheCpuImplementation) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    // The fused CUDA kernels contract multiply-adds that the CPU loop rounds separately: 1.43e-6
    // measured on an H200 with LibTorch 2.11 after three steps.
    const double tolerance = kind == OptimizerKind::kAdamW8bit ? 1e-4 : 4e-6;
    EXPECT_LE(CpuVsCudaDifference(optim_testing::Options(kind), kSizes, torch::kFloat, 3),
              tolerance)
        << OptimizerKindName(kind);
  }
}

TEST(CudaOptimizerTest, OffloadMatchesTheCpuImplementation) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    OptimizerOptions options = optim_testing::Options(kind);
    options.offload_to_cpu = true;
    // 17 Mi elements: crosses a staging chunk boundary.
    EXPECT_LE(CpuVsCudaDifference(options, {int64_t{17} << 20, 5000}, torch::kFloat, 2), 1e-6)
        << OptimizerKindName(kind);
  }
}

TEST(CudaOptimizerTest, OffloadedBf16MasterStaysWithinOneRoundingOfTheCpuResult) {
  // The host loop's fp32 master agrees with the CPU ops to ~2e-7 relative; rounded to bf16 it can
  // land one step apart, 2^-5 for |p| in [4, 8) (randn over 17 Mi elements peaks near 5.5).
  OptimizerOptions options = optim_testing::Options(OptimizerKind::kAdamWFp32Master);
  options.offload_to_cpu = true;
  EXPECT_LE(CpuVsCudaDifference(options, {int64_t{17} << 20, 5000}, torch::kBFloat16, 2), 1.0 / 32);
}

TEST(CudaOptimizerTest, Bf16AdamWStaysWithinBf16RoundingOfTheCpuResult) {
  // The fused kernel computes in fp32 and rounds once; the CPU ops round after each op.
  EXPECT_LE(CpuVsCudaDifference(optim_testing::Options(OptimizerKind::kAdamW), kSizes,
                                torch::kBFloat16, 1),
            0.05);
  EXPECT_LE(CpuVsCudaDifference(optim_testing::Options(OptimizerKind::kAdamWFp32Master), kSizes,
                                torch::kBFloat16, 3),
            0.05);
}

// bf16 AdamW with its state offloaded updates as the same optimizer with its state on the GPU
// (the fused kernel): both compute in fp32 and round once per stored tensor. They can differ only
// where the kernel's own order of operations (double-precision scalars, multiply-adds) moves a
// value across a bf16 rounding boundary.
TEST(CudaOptimizerTest, OffloadedBf16AdamWUpdatesAsTheOnDeviceFusedStep) {
  // The gradients are made on the CPU (optim_testing::SetGradients) and copied to both.
  NamedParams source =
      optim_testing::SyntheticParams({int64_t{17} << 20, 5000, 3}, torch::kBFloat16, 1);
  NamedParams on_device = ToDevice(source, torch::kCUDA);
  NamedParams offloaded = ToDevice(source, torch::kCUDA);
  OptimizerOptions options = optim_testing::Options(OptimizerKind::kAdamW);
  auto device_optimizer = MakeOptimizer(on_device, options);
  options.offload_to_cpu = true;
  auto host_optimizer = MakeOptimizer(offloaded, options);
  for (int t = 0; t < 3; ++t) {
    optim_testing::SetGradients(source, 20 + t);
    CopyGradients(source, on_device);
    CopyGradients(source, offloaded);
    device_optimizer->Step();
    host_optimizer->Step();
  }
  // Apart from identical elements, the two may differ by one bf16 rounding of the result and,
  // where a stored moment landed one bf16 step apart in an earlier step, by that moment's share
  // of the later updates. For an element whose gradients are near zero, v is near zero too and
  // m / sqrt(v) moves by up to its own size: each step's update is at most about lr, so three
  // steps bound it by 3 lr (measured on an H200: 0.96 lr, in 0.009 % of the elements).
  const double lr = options.lr;
  int64_t elements = 0, identical = 0;
  double worst_excess = 0;  // beyond max(|a|, |b|) / 128, in learning rates
  for (size_t i = 0; i < on_device.size(); ++i) {
    const torch::Tensor a = on_device[i].second.cpu(), b = offloaded[i].second.cpu();
    elements += a.numel();
    identical += a.eq(b).sum().item<int64_t>();
    const torch::Tensor a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
    const torch::Tensor excess = (a64 - b64).abs() - torch::max(a64.abs(), b64.abs()) / 128;
    worst_excess = std::max(worst_excess, excess.max().item<double>() / lr);
  }
  const double identical_fraction = static_cast<double>(identical) / static_cast<double>(elements);
  std::cout << "offloaded bf16 AdamW against the fused kernel: identical " << identical_fraction
            << ", worst difference beyond one bf16 rounding " << worst_excess << " lr\n";
  EXPECT_GT(identical_fraction, 0.999);
  EXPECT_LE(worst_excess, 3.0);
}

TEST(CudaOptimizerTest, StateBytesOnDeviceAndHost) {
  NamedParams params =
      ToDevice(optim_testing::SyntheticParams({1000, 3000}, torch::kBFloat16, 1), torch::kCUDA);
  auto on_device = MakeOptimizer(params, optim_testing::Options(OptimizerKind::kAdamW));
  OptimizerOptions offload = optim_testing::Options(OptimizerKind::kAdamWFp32Master);
  offload.offload_to_cpu = true;
  auto offloaded = MakeOptimizer(params, offload);
  for (const auto& [name, p] : params) p.mutable_grad() = torch::ones_like(p);
  on_device->Step();
  offloaded->Step();
  EXPECT_EQ(on_device->DeviceStateBytes(), 2 * 2 * 4000);
  EXPECT_EQ(on_device->HostStateBytes(), 0);
  EXPECT_EQ(offloaded->DeviceStateBytes(), 0);
  // 12 bytes per element plus two pinned staging buffers of 16 Mi elements (bf16 gradient and
  // parameter).
  EXPECT_EQ(offloaded->HostStateBytes(), 12 * 4000 + 2 * 2 * (int64_t{16} << 20));
#if TORCH_VERSION_MAJOR >= 2
  EXPECT_NE(on_device->Describe().find("adamw fused"), std::string::npos) << on_device->Describe();
#endif
  EXPECT_NE(offloaded->Describe().find("pinned"), std::string::npos) << offloaded->Describe();
}

// The overlapped offload (gradients copied and stepped on the host during backward, each parameter
// written back on a second stream once its update is done, behind its gradient's completion)
// gives the synchronous offload step's result exactly: the same host loops run on the same chunks,
// and no write-back lands before backward's last read of the parameter.
TEST(CudaOptimizerTest, OverlappedOffloadMatchesTheSynchronousOne) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    NamedParams sync_params =
        ToDevice(optim_testing::SyntheticParams({int64_t{17} << 20, 5000, 3}, torch::kBFloat16, 1),
                 torch::kCUDA);
    NamedParams overlap_params = ToDevice(sync_params, torch::kCUDA);
    OptimizerOptions options = optim_testing::Options(kind);
    options.offload_to_cpu = true;
    auto sync = MakeOptimizer(sync_params, options);
    auto overlapped = MakeOptimizer(overlap_params, options);
    EXPECT_NE(overlapped->Describe().find("overlapped with backward"), std::string::npos)
        << overlapped->Describe();
    auto loss_of = [](const NamedParams& p, int micro) {
      torch::Tensor loss = (p[0].second.to(torch::kFloat) * (0.5 + micro)).sin().sum();
      for (const auto& [name, t] : p) loss = loss + (t.to(torch::kFloat) * 1.5).cos().sum();
      return loss;
    };
    for (int step = 0; step < 2; ++step) {
      for (int micro = 0; micro < 2; ++micro) {
        loss_of(sync_params, micro).backward();
        if (micro == 1) overlapped->ExpectStepAfterNextBackward();
        loss_of(overlap_params, micro).backward();
      }
      sync->Step();
      overlapped->Step();
      sync->ZeroGrad();
      overlapped->ZeroGrad();
    }
    for (size_t i = 0; i < sync_params.size(); ++i) {
      EXPECT_TRUE(torch::equal(sync_params[i].second, overlap_params[i].second))
          << OptimizerKindName(kind) << " " << sync_params[i].first;
    }
  }
}

// The delayed update on the device (delayed_update_pipeline.h): update t-1's write-backs run on
// their own stream during step t's backward, each behind the point where step t's gradient of
// the parameter is complete. The result equals the synchronous offloaded step handed the lagged
// gradients g_t = ∇L_t(θ_{max(0, t-2)}), bit for bit, as on the CPU (optim_delayed_update_test.cc).
TEST(CudaOptimizerTest, DelayedOffloadEqualsTheSynchronousStepFedTheLaggedGradients) {
  auto loss_of = [](const NamedParams& p, int t) {
    torch::Tensor loss = (p[0].second.to(torch::kFloat) * (0.5 + 0.25 * t)).sin().sum();
    for (const auto& [name, x] : p) loss = loss + (x.to(torch::kFloat) * 1.5).cos().sum();
    return loss;
  };
  auto gradients_at = [&](const NamedParams& at, int t) {
    NamedParams leaves = ToDevice(at, torch::kCUDA);
    loss_of(leaves, t).backward();
    std::vector<torch::Tensor> grads;
    for (const auto& [name, x] : leaves) grads.push_back(x.grad());
    return grads;
  };
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kAdamWFp32Master}) {
    const NamedParams initial =
        ToDevice(optim_testing::SyntheticParams({int64_t{17} << 20, 5000, 3}, torch::kBFloat16, 4),
                 torch::kCUDA);
    OptimizerOptions options = optim_testing::Options(kind, /*lr=*/2e-2);
    options.offload_to_cpu = true;
    NamedParams reference = ToDevice(initial, torch::kCUDA);
    auto sync = MakeOptimizer(reference, options);
    options.delayed_update = true;
    NamedParams params = ToDevice(initial, torch::kCUDA);
    auto delayed = MakeOptimizer(params, options);
    NamedParams two_back = ToDevice(initial, torch::kCUDA),
                one_back = ToDevice(initial, torch::kCUDA);
    for (int t = 1; t <= 4; ++t) {
      delayed->ExpectStepAfterNextBackward();
      loss_of(params, t).backward();
      const std::vector<torch::Tensor> grads = gradients_at(two_back, t);
      for (size_t i = 0; i < reference.size(); ++i) reference[i].second.mutable_grad() = grads[i];
      delayed->Step();
      delayed->ZeroGrad();
      sync->Step();
      sync->ZeroGrad();
      two_back = std::move(one_back);
      one_back = ToDevice(reference, torch::kCUDA);
    }
    delayed->Finish();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(torch::equal(params[i].second, reference[i].second))
          << OptimizerKindName(kind) << " " << params[i].first << ": max diff "
          << optim_testing::MaxAbsDiff(params[i].second, reference[i].second);
    }
  }
}

// The hook runs on the autograd device thread; a parameter used twice is updated once with the
// sum of both contributions.
TEST(CudaOptimizerTest, InBackwardMatchesANormalStep) {
  NamedParams normal =
      ToDevice(optim_testing::SyntheticParams({4096, 300}, torch::kFloat, 1), torch::kCUDA);
  NamedParams hooked = ToDevice(normal, torch::kCUDA);
  OptimizerOptions options = optim_testing::Options(OptimizerKind::kAdamW);
  auto normal_optimizer = MakeOptimizer(normal, options);
  options.in_backward = true;
  auto hooked_optimizer = MakeOptimizer(hooked, options);
  auto loss_of = [](const NamedParams& p) {
    return (p[0].second.sin().sum() + (p[0].second * 3).cos().sum()) * p[1].second.sum();
  };
  for (int t = 0; t < 2; ++t) {
    loss_of(normal).backward();
    normal_optimizer->Step();
    normal_optimizer->ZeroGrad();
    loss_of(hooked).backward();
    for (const auto& [name, p] : hooked) EXPECT_FALSE(p.grad().defined()) << name;
  }
  for (size_t i = 0; i < normal.size(); ++i) {
    EXPECT_LE(optim_testing::MaxAbsDiff(normal[i].second, hooked[i].second), 1e-6) << i;
  }
}

}  // namespace
}  // namespace vramlab::worker

#endif  // VRAMLAB_WITH_CUDA
