// The update of each optimizer kind against the textbook formula computed in float64, and the
// optimizer's contract: lazy state, set_to_none, per-parameter steps, rejected input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using optim_testing::Clone;
using optim_testing::MaxAbsDiff;
using optim_testing::NamedParams;
using optim_testing::Options;
using optim_testing::SetGradients;
using optim_testing::SyntheticParams;

// torch.optim.AdamW in float64 on `p` with moments m, v, at 1-based step t.
void ReferenceAdamW(const OptimizerOptions& o, int64_t t, torch::Tensor& p, const torch::Tensor& g,
                    torch::Tensor& m, torch::Tensor& v) {
  p = p * (1 - o.lr * o.weight_decay);
  m = o.beta1 * m + (1 - o.beta1) * g;
  v = o.beta2 * v + (1 - o.beta2) * g * g;
  const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
  p = p - (o.lr / bc1) * m / (v.sqrt() / std::sqrt(bc2) + o.eps);
}

// Runs `steps` steps of `options` on fresh params and the float64 reference side by side;
// returns the parameters of both.
struct Trajectory {
  NamedParams params;
  std::vector<torch::Tensor> reference;
};

// Parameters are N(0, scale^2); with `same_gradient` every step sees the gradient of step 1 (a
// steady drift instead of a random walk).
Trajectory RunAgainstReference(const OptimizerOptions& options, torch::ScalarType dtype, int steps,
                               const std::vector<int64_t>& sizes, double scale = 1.0,
                               bool same_gradient = false) {
  Trajectory out;
  for (const auto& [name, p] : SyntheticParams(sizes, torch::kFloat, /*seed=*/7)) {
    out.params.emplace_back(name, (p.detach() * scale).to(dtype).set_requires_grad(true));
  }
  std::vector<torch::Tensor> m, v;
  for (const auto& [name, p] : out.params) {
    out.reference.push_back(p.detach().to(torch::kFloat64));
    m.push_back(torch::zeros_like(out.reference.back()));
    v.push_back(torch::zeros_like(out.reference.back()));
  }
  auto optimizer = MakeOptimizer(out.params, options);
  for (int t = 1; t <= steps; ++t) {
    SetGradients(out.params, /*seed=*/same_gradient ? 100 : 100 + t);
    for (size_t i = 0; i < out.params.size(); ++i) {
      const torch::Tensor g = out.params[i].second.grad().to(torch::kFloat64);
      if (options.kind == OptimizerKind::kSgd) {
        // torch.optim.SGD: d = g + wd p; buf = momentum buf + d (buf = d at t = 1); p -= lr buf.
        const torch::Tensor d = g + options.weight_decay * out.reference[i];
        m[i] = t == 1 ? d : options.momentum * m[i] + d;
        out.reference[i] = out.reference[i] - options.lr * m[i];
      } else {
        ReferenceAdamW(options, t, out.reference[i], g, m[i], v[i]);
      }
    }
    optimizer->Step();
    optimizer->ZeroGrad();
  }
  return out;
}

TEST(UpdateMathTest, AdamWMatchesFloat64Reference) {
  // Weights of the scale of real ones, so five steps of fp32 rounding stay well below 1e-6.
  Trajectory run = RunAgainstReference(Options(OptimizerKind::kAdamW), torch::kFloat, 5,
                                       {1000, 70000, 3}, /*scale=*/0.1);
  for (size_t i = 0; i < run.params.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(run.params[i].second, run.reference[i]), 1e-6) << i;
  }
}

TEST(UpdateMathTest, Fp32MasterMatchesFloat64Reference) {
  // fp32 parameters: the master is the parameter, so the fp32 error bound applies.
  Trajectory fp32 = RunAgainstReference(Options(OptimizerKind::kAdamWFp32Master), torch::kFloat, 5,
                                        {1000, 70000, 3}, /*scale=*/0.1);
  for (size_t i = 0; i < fp32.params.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(fp32.params[i].second, fp32.reference[i]), 1e-6) << i;
  }
}

// 100 steps of lr 2e-4 with a steady gradient on bf16 parameters: each update is below bf16's
// resolution for most weights (8 significant bits), so AdamW with bf16 state loses them, while
// the fp32 master accumulates the 2e-2 drift and the bf16 parameter stays within bf16 rounding
// (half an ulp, at most 2^-8 relative) of the float64 trajectory.
TEST(UpdateMathTest, Fp32MasterKeepsUpdatesThatBf16StateLoses) {
  const std::vector<int64_t> sizes = {4096};
  Trajectory master = RunAgainstReference(Options(OptimizerKind::kAdamWFp32Master, 2e-4),
                                          torch::kBFloat16, 100, sizes, 1.0, true);
  Trajectory bf16 = RunAgainstReference(Options(OptimizerKind::kAdamW, 2e-4), torch::kBFloat16, 100,
                                        sizes, 1.0, true);
  const torch::Tensor reference = master.reference[0];
  const torch::Tensor master_error =
      (master.params[0].second.to(torch::kFloat64) - reference).abs();
  const torch::Tensor bf16_error = (bf16.params[0].second.to(torch::kFloat64) - reference).abs();
  EXPECT_TRUE((master_error <= reference.abs() * std::pow(2.0, -8) + 1e-6).all().item<bool>());
  EXPECT_LT(master_error.mean().item<double>() * 4, bf16_error.mean().item<double>())
      << "master " << master_error.mean().item<double>() << ", bf16 state "
      << bf16_error.mean().item<double>();
}

TEST(UpdateMathTest, SgdMomentumMatchesTorchFormula) {
  OptimizerOptions options = Options(OptimizerKind::kSgd, 0.05);
  options.momentum = 0.9;
  options.weight_decay = 0.01;
  Trajectory run = RunAgainstReference(options, torch::kFloat, 5, {1000, 70000, 3});
  for (size_t i = 0; i < run.params.size(); ++i) {
    EXPECT_LE(MaxAbsDiff(run.params[i].second, run.reference[i]), 1e-6) << i;
  }
}

TEST(UpdateMathTest, SgdWithoutMomentumKeepsNoState) {
  OptimizerOptions options = Options(OptimizerKind::kSgd, 0.05);
  options.momentum = 0;
  Trajectory run = RunAgainstReference(options, torch::kFloat, 3, {1000});
  EXPECT_LE(MaxAbsDiff(run.params[0].second, run.reference[0]), 1e-6);
  auto optimizer = MakeOptimizer(run.params, options);
  SetGradients(run.params, 1);
  optimizer->Step();
  EXPECT_EQ(optimizer->DeviceStateBytes(), 0);
}

TEST(OptimizerContractTest, StateIsCreatedOnTheFirstStep) {
  for (OptimizerKind kind : optim_testing::AllKinds()) {
    NamedParams params = SyntheticParams({5000}, torch::kFloat, 1);
    auto optimizer = MakeOptimizer(params, Options(kind));
    EXPECT_EQ(optimizer->DeviceStateBytes(), 0) << OptimizerKindName(kind);
    SetGradients(params, 2);
    optimizer->Step();
    EXPECT_GT(optimizer->DeviceStateBytes(), 0) << OptimizerKindName(kind);
    EXPECT_EQ(optimizer->HostStateBytes(), 0) << OptimizerKindName(kind);
  }
}

TEST(OptimizerContractTest, ZeroGradLeavesGradientsUndefined) {
  NamedParams params = SyntheticParams({10, 20}, torch::kFloat, 1);
  auto optimizer = MakeOptimizer(params, Options(OptimizerKind::kAdamW));
  SetGradients(params, 2);
  optimizer->Step();
  optimizer->ZeroGrad();
  for (const auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
}

// A parameter without a gradient is left alone and gets no state; its own step count starts when
// its first gradient arrives (the bias correction of its first update is that of step 1).
TEST(OptimizerContractTest, ParametersWithoutGradientAreSkipped) {
  NamedParams params = SyntheticParams({100, 100}, torch::kFloat, 1);
  NamedParams fresh = Clone({params[1]});
  auto optimizer = MakeOptimizer(params, Options(OptimizerKind::kAdamW));
  auto fresh_optimizer = MakeOptimizer(fresh, Options(OptimizerKind::kAdamW));
  const torch::Tensor untouched = params[1].second.detach().clone();
  SetGradients({params[0]}, 2);
  optimizer->Step();
  EXPECT_TRUE(torch::equal(params[1].second, untouched));
  EXPECT_EQ(optimizer->DeviceStateBytes(), 2 * 4 * 100);
  optimizer->ZeroGrad();
  SetGradients(params, 3);
  fresh[0].second.mutable_grad() = params[1].second.grad().clone();
  optimizer->Step();
  fresh_optimizer->Step();
  EXPECT_LE(MaxAbsDiff(params[1].second, fresh[0].second), 0.0);
}

// A tensor listed under two names (a tied embedding) is one parameter: one state, one update.
TEST(OptimizerContractTest, RepeatedTensorIsUpdatedOnce) {
  NamedParams once = SyntheticParams({300}, torch::kFloat, 1);
  NamedParams twice = Clone(once);
  twice.emplace_back("alias", twice[0].second);
  auto a = MakeOptimizer(once, Options(OptimizerKind::kAdamW));
  auto b = MakeOptimizer(twice, Options(OptimizerKind::kAdamW));
  SetGradients(once, 5);
  SetGradients({twice[0]}, 5);
  a->Step();
  b->Step();
  EXPECT_EQ(a->DeviceStateBytes(), b->DeviceStateBytes());
  EXPECT_LE(MaxAbsDiff(once[0].second, twice[0].second), 0.0);
}

TEST(OptimizerContractTest, DescribeNamesKindStateAndSwitches) {
  NamedParams params = SyntheticParams({10}, torch::kBFloat16, 1);
  EXPECT_EQ(MakeOptimizer(params, Options(OptimizerKind::kAdamW))->Describe().rfind("adamw ", 0),
            0u);
  EXPECT_NE(MakeOptimizer(params, Options(OptimizerKind::kAdamW))->Describe().find("bf16 state"),
            std::string::npos);
  OptimizerOptions offloaded = Options(OptimizerKind::kAdamWFp32Master);
  offloaded.offload_to_cpu = true;
  offloaded.in_backward = true;
  const std::string description = MakeOptimizer(params, offloaded)->Describe();
  EXPECT_NE(description.find("adamw-fp32-master host-step"), std::string::npos) << description;
  EXPECT_NE(description.find("offloaded"), std::string::npos) << description;
  EXPECT_NE(description.find("in backward"), std::string::npos) << description;
}

TEST(OptimizerContractTest, RejectsBadOptions) {
  NamedParams params = SyntheticParams({10}, torch::kFloat, 1);
  auto bad = [&](auto mutate) {
    OptimizerOptions options;
    mutate(options);
    return MakeOptimizer(params, options);
  };
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.lr = -1; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.lr = NAN; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.beta1 = 1; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.beta2 = -0.1; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.eps = 0; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.weight_decay = -1; }), std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) {
                 o.kind = OptimizerKind::kSgd;
                 o.momentum = 1;
               }),
               std::invalid_argument);
  EXPECT_THROW(bad([](OptimizerOptions& o) { o.kind = static_cast<OptimizerKind>(42); }),
               std::invalid_argument);
}

TEST(OptimizerContractTest, RejectsBadParameters) {
  const OptimizerOptions options;
  auto make = [&](torch::Tensor p) { return MakeOptimizer({{"w", p}}, options); };
  EXPECT_THROW(MakeOptimizer({}, options), std::invalid_argument);
  EXPECT_THROW(make(torch::Tensor()), std::invalid_argument);
  EXPECT_THROW(make(torch::zeros({4})), std::invalid_argument);  // no requires_grad
  EXPECT_THROW(make(torch::zeros({4}, torch::kLong)), std::invalid_argument);
  torch::Tensor leaf = torch::zeros({4, 4}).set_requires_grad(true);
  EXPECT_THROW(make(leaf * 2), std::invalid_argument);  // not a leaf
  torch::Tensor transposed = torch::zeros({4, 3}).t().detach().set_requires_grad(true);
  EXPECT_THROW(make(transposed), std::invalid_argument);  // not contiguous
  try {
    make(torch::zeros({4}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vramlab::worker
