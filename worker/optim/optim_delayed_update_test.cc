// The delayed offloaded update (OptimizerOptions::delayed_update, delayed_update_pipeline.h) on CPU
// parameters, where its copies are synchronous but its order of operations is the one CUDA runs.
//
// The semantics checked: with θ_0 the initial parameters and θ_t those after update t (1-based),
// the forward and backward of step t run at θ_{max(0, t-2)}, so update t is
//   θ_t = AdamW(θ_{t-1}, g_t, t),  g_t = ∇L_t(θ_{max(0, t-2)}),
// Step() t leaves θ_{t-1} in the parameters (update t runs on while the caller goes on), and
// Finish() after Step() K leaves θ_K.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using optim_testing::NamedParams;

constexpr int kSteps = 5;

OptimizerOptions Delayed(OptimizerKind kind) {
  OptimizerOptions options = optim_testing::Options(kind, /*lr=*/2e-2);
  options.weight_decay = 0.1;
  options.offload_to_cpu = true;
  options.delayed_update = true;
  return options;
}

// Step t's loss (every parameter used; the first twice, so its gradient sums two contributions).
torch::Tensor Loss(const NamedParams& p, int step) {
  torch::Tensor loss = (p[0].second.to(torch::kFloat) * (0.5 + 0.25 * step)).sin().sum();
  for (const auto& [name, t] : p) loss = loss + (t.to(torch::kFloat) * 1.5).cos().sum();
  return loss;
}

// The gradients of step t's loss at `at` (fresh leaves, so `at` itself is untouched).
std::vector<torch::Tensor> GradientsAt(const NamedParams& at, int step) {
  NamedParams leaves = optim_testing::Clone(at);
  Loss(leaves, step).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& [name, p] : leaves) grads.push_back(p.grad());
  return grads;
}

double MaxDiff(const NamedParams& a, const NamedParams& b) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, optim_testing::MaxAbsDiff(a[i].second, b[i].second));
  return diff;
}

// torch.optim.AdamW by hand, in fp64: decoupled decay, bias-corrected moments.
struct ReferenceAdamW {
  explicit ReferenceAdamW(const OptimizerOptions& o) : options(o) {}
  void Step(NamedParams& params, const std::vector<torch::Tensor>& grads, int t) {
    if (m.empty()) {
      for (const auto& [name, p] : params) {
        m.push_back(torch::zeros(p.sizes(), torch::kFloat64));
        v.push_back(torch::zeros(p.sizes(), torch::kFloat64));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor g = grads[i].to(torch::kFloat64);
      torch::Tensor p = params[i].second.detach().to(torch::kFloat64);
      p.mul_(1 - options.lr * options.weight_decay);
      m[i].mul_(options.beta1).add_(g, 1 - options.beta1);
      v[i].mul_(options.beta2).addcmul_(g, g, 1 - options.beta2);
      const double c1 = 1 - std::pow(options.beta1, t), c2 = 1 - std::pow(options.beta2, t);
      p.sub_(options.lr * (m[i] / c1) / ((v[i] / c2).sqrt() + options.eps));
      params[i].second = p.to(params[i].second.scalar_type()).set_requires_grad(true);
    }
  }
  OptimizerOptions options;
  std::vector<torch::Tensor> m, v;
};

// θ_0..θ_K by the formula at the top; `lag` 2 is the delayed update, 1 the undelayed one.
std::vector<NamedParams> ReferenceTrajectory(const NamedParams& initial,
                                             const OptimizerOptions& options, int lag) {
  ReferenceAdamW adamw(options);
  std::vector<NamedParams> theta = {optim_testing::Clone(initial)};
  for (int t = 1; t <= kSteps; ++t) {
    const std::vector<torch::Tensor> grads = GradientsAt(theta[std::max(0, t - lag)], t);
    NamedParams next = optim_testing::Clone(theta.back());
    adamw.Step(next, grads, t);
    theta.push_back(std::move(next));
  }
  return theta;
}

TEST(DelayedUpdateTest, AdamWAppliesEachGradientOneStepLateAndFinishAppliesTheLast) {
  // Values within about ±1.2, where fp32's spacing (at most 1.2e-7) leaves room for the rounding
  // of a few steps under the tolerance.
  NamedParams initial = optim_testing::SyntheticParams({70000, 5000, 3}, torch::kFloat, 11);
  for (auto& [name, p] : initial) p = (p.detach() * 0.25).set_requires_grad(true);
  const OptimizerOptions options = Delayed(OptimizerKind::kAdamW);
  const std::vector<NamedParams> theta = ReferenceTrajectory(initial, options, /*lag=*/2);
  const std::vector<NamedParams> undelayed = ReferenceTrajectory(initial, options, /*lag=*/1);
  // The two schedules differ by far more than the tolerance, so the check below tells them apart.
  EXPECT_GT(MaxDiff(theta[kSteps], undelayed[kSteps]), 1e-3);

  NamedParams params = optim_testing::Clone(initial);
  auto optimizer = MakeOptimizer(params, options);
  EXPECT_NE(optimizer->Describe().find("update delayed by one step"), std::string::npos)
      << optimizer->Describe();
  for (int t = 1; t <= kSteps; ++t) {
    optimizer->ExpectStepAfterNextBackward();
    Loss(params, t).backward();
    optimizer->Step();
    optimizer->ZeroGrad();
    EXPECT_LE(MaxDiff(params, theta[t - 1]), 1e-6) << "after Step() " << t;
  }
  optimizer->Finish();
  const double diff = MaxDiff(params, theta[kSteps]);
  EXPECT_LE(diff, 1e-6);
  std::printf("delayed AdamW after Finish(): max |θ - θ_ref| = %.3g\n", diff);
  optimizer->Finish();  // nothing pending: the parameters stay
  EXPECT_LE(MaxDiff(params, theta[kSteps]), 1e-6);
}

// Every kind in fp32 and bf16 (bf16 AdamW keeps bf16 moments and reads the parameters): the
// delayed run equals the synchronous offloaded optimizer handed g_t = ∇L_t(θ_{max(0, t-2)}),
// bit for bit, with gradient accumulation over two micro-batches.
TEST(DelayedUpdateTest, EqualsTheSynchronousStepFedTheLaggedGradientsForEveryKind) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
      const std::string what =
          OptimizerKindName(kind) + (dtype == torch::kFloat ? " fp32" : " bf16");
      const NamedParams initial = optim_testing::SyntheticParams({70000, 5000, 3}, dtype, 12);
      OptimizerOptions sync_options = Delayed(kind);
      sync_options.delayed_update = false;
      NamedParams reference = optim_testing::Clone(initial);
      auto sync = MakeOptimizer(reference, sync_options);
      NamedParams params = optim_testing::Clone(initial);
      auto delayed = MakeOptimizer(params, Delayed(kind));
      NamedParams two_back = optim_testing::Clone(initial),
                  one_back = optim_testing::Clone(initial);
      for (int t = 1; t <= kSteps; ++t) {
        for (int micro = 0; micro < 2; ++micro) {
          if (micro == 1) delayed->ExpectStepAfterNextBackward();
          Loss(params, t + micro).backward();
          const std::vector<torch::Tensor> grads = GradientsAt(two_back, t + micro);
          for (size_t i = 0; i < reference.size(); ++i) {
            torch::Tensor& g = reference[i].second.mutable_grad();
            g = g.defined() ? g + grads[i] : grads[i];
          }
        }
        delayed->Step();
        delayed->ZeroGrad();
        sync->Step();
        sync->ZeroGrad();
        two_back = std::move(one_back);
        one_back = optim_testing::Clone(reference);
      }
      delayed->Finish();
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::equal(params[i].second, reference[i].second))
            << what << " " << params[i].first << ": max diff "
            << optim_testing::MaxAbsDiff(params[i].second, reference[i].second);
      }
    }
  }
}

// The pipeline keeps no device gradient past Step(), so ZeroGrad() frees them as without it.
TEST(DelayedUpdateTest, StepReleasesTheGradientsAndHostBytesCountTheNewBuffers) {
  NamedParams params = optim_testing::SyntheticParams({5000, 3}, torch::kFloat, 13);
  auto optimizer = MakeOptimizer(params, Delayed(OptimizerKind::kAdamW));
  for (int t = 1; t <= 2; ++t) {
    optimizer->ExpectStepAfterNextBackward();
    Loss(params, t).backward();
    std::vector<torch::Tensor> grads;
    for (const auto& [name, p] : params) grads.push_back(p.grad());
    optimizer->Step();
    optimizer->ZeroGrad();
    for (const torch::Tensor& g : grads) EXPECT_EQ(g.use_count(), 1) << "step " << t;
  }
  // fp32 moments (8 bytes per element), the new values (4) and the host gradients (4).
  EXPECT_EQ(optimizer->HostStateBytes(), 16 * 5003);
  EXPECT_EQ(optimizer->DeviceStateBytes(), 0);
  optimizer->Finish();
}

// One entry per update, the last one completed by Finish().
TEST(DelayedUpdateTest, HostStepSummaryCountsEveryUpdate) {
  NamedParams params = optim_testing::SyntheticParams({5000, 3}, torch::kFloat, 14);
  auto optimizer = MakeOptimizer(params, Delayed(OptimizerKind::kAdamW));
  for (int t = 1; t <= 3; ++t) {
    optimizer->ExpectStepAfterNextBackward();
    Loss(params, t).backward();
    optimizer->Step();
    optimizer->ZeroGrad();
  }
  EXPECT_EQ(optimizer->HostStepSummary().rfind("host step, median of 1 steps after the first: ", 0),
            0u)
      << optimizer->HostStepSummary();
  optimizer->Finish();
  EXPECT_EQ(optimizer->HostStepSummary().rfind("host step, median of 2 steps after the first: ", 0),
            0u)
      << optimizer->HostStepSummary();
}

// A gradient no announced backward produced is applied by Step() at once, after the pending
// update was published, as the synchronous offload step applies it.
TEST(DelayedUpdateTest, GradientsFromOutsideAnAnnouncedBackwardAreNotDelayed) {
  NamedParams params = optim_testing::SyntheticParams({5000}, torch::kFloat, 15);
  NamedParams reference = optim_testing::Clone(params);
  OptimizerOptions sync_options = Delayed(OptimizerKind::kAdamW);
  sync_options.delayed_update = false;
  auto sync = MakeOptimizer(reference, sync_options);
  auto delayed = MakeOptimizer(params, Delayed(OptimizerKind::kAdamW));
  for (int t = 1; t <= 3; ++t) {
    for (auto* run : {&params, &reference}) {
      Optimizer& optimizer = run == &params ? *delayed : *sync;
      (*run)[0].second.mutable_grad() = torch::full({5000}, 0.25 * t);
      optimizer.Step();
      optimizer.ZeroGrad();
    }
    EXPECT_TRUE(torch::equal(params[0].second, reference[0].second)) << "step " << t;
  }
}

TEST(DelayedUpdateTest, NeedsOffloadAndRefusesInBackward) {
  NamedParams params = optim_testing::SyntheticParams({8}, torch::kFloat, 16);
  OptimizerOptions no_offload = Delayed(OptimizerKind::kAdamW);
  no_offload.offload_to_cpu = false;
  EXPECT_THROW(MakeOptimizer(params, no_offload), std::invalid_argument);
  OptimizerOptions in_backward = Delayed(OptimizerKind::kAdamW);
  in_backward.in_backward = true;
  EXPECT_THROW(MakeOptimizer(params, in_backward), std::invalid_argument);
  // Without the switch, Finish() is a no-op that leaves the parameters as Step() left them.
  OptimizerOptions plain = Delayed(OptimizerKind::kAdamW);
  plain.delayed_update = false;
  auto optimizer = MakeOptimizer(params, plain);
  params[0].second.mutable_grad() = torch::ones({8});
  optimizer->Step();
  const torch::Tensor after_step = params[0].second.detach().clone();
  optimizer->Finish();
  EXPECT_TRUE(torch::equal(params[0].second, after_step));
  EXPECT_FALSE(torch::equal(params[0].second,
                            optim_testing::SyntheticParams({8}, torch::kFloat, 16)[0].second));
}

}  // namespace
}  // namespace vramlab::worker
