// The one-pass host AdamW against AdamWUpdate's ATen ops: in fp32 the same rounding, op by op; in
// bf16 the fp32 update rounded once per stored tensor.
#include "worker/optim/host_adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>

namespace vramlab::worker::optim_internal {
namespace {

struct State {
  torch::Tensor p, g, m, v;
  State Clone() const { return {p.clone(), g.clone(), m.clone(), v.clone()}; }
};

// Parameters, a gradient, and moments as they look a few steps into training.
State RandomState(int64_t n, torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({n}).to(dtype), (torch::randn({n}) * 1e-2).to(dtype),
          (torch::randn({n}) * 1e-3).to(dtype), (torch::rand({n}) * 1e-5).to(dtype)};
}

AdamWHyper Hyper() {
  AdamWHyper h;
  h.lr = 1e-3;  // large enough that every element moves
  return h;
}

// Three steps each way from the same state; returns the largest difference over the three
// tensors relative to each tensor's largest value, and the fraction of bit-identical elements.
std::pair<double, double> Compare(int64_t n, torch::ScalarType dtype) {
  State a = RandomState(n, dtype, 5), b = a.Clone();
  for (int64_t step = 1; step <= 3; ++step) {
    AdamWUpdate(Hyper(), step, a.p, a.g, a.m, a.v);
    HostAdamW(Hyper(), step, b.p, b.g, b.m, b.v);
  }
  double worst = 0, identical = 0;
  for (auto [x, y] : {std::pair{a.p, b.p}, {a.m, b.m}, {a.v, b.v}}) {
    const torch::Tensor x64 = x.to(torch::kDouble), y64 = y.to(torch::kDouble);
    worst = std::max(worst, ((x64 - y64).abs().max() / x64.abs().max()).item<double>());
    identical += x.eq(y).to(torch::kDouble).mean().item<double>() / 3;
  }
  return {worst, identical};
}

TEST(HostAdamWTest, Fp32MatchesTheAtenOps) {
  const auto [worst, identical] =
      Compare((int64_t{3} << 18) + 5, torch::kFloat);  // several threads
  std::cout << "fp32: worst relative difference " << worst << ", identical " << identical << "\n";
  EXPECT_LT(worst, 1e-6);
}

// bf16 state: three steps of the fp32 loop on upcast values, each step's results rounded to bf16,
// bit for bit — the arithmetic of a fused AdamW kernel (fp32 math, one rounding per stored
// tensor), not the bf16 ATen ops' rounding after every op.
TEST(HostAdamWTest, Bf16IsTheFp32UpdateRoundedOncePerStep) {
  const int64_t n = (int64_t{3} << 18) + 5;  // several threads
  State bf16 = RandomState(n, torch::kBFloat16, 5);
  const State start = bf16.Clone();
  State fp32{bf16.p.to(torch::kFloat), bf16.g.to(torch::kFloat), bf16.m.to(torch::kFloat),
             bf16.v.to(torch::kFloat)};
  State aten_ops = bf16.Clone();
  for (int64_t step = 1; step <= 3; ++step) {
    HostAdamW(Hyper(), step, bf16.p, bf16.g, bf16.m, bf16.v);
    HostAdamW(Hyper(), step, fp32.p, fp32.g, fp32.m, fp32.v);
    for (torch::Tensor* t : {&fp32.p, &fp32.m, &fp32.v})
      *t = t->to(torch::kBFloat16).to(torch::kFloat);
    AdamWUpdate(Hyper(), step, aten_ops.p, aten_ops.g, aten_ops.m, aten_ops.v);
  }
  EXPECT_TRUE(torch::equal(bf16.p, fp32.p.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(bf16.m, fp32.m.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(bf16.v, fp32.v.to(torch::kBFloat16)));
  EXPECT_FALSE(torch::equal(bf16.p, start.p));  // every element moved (lr 1e-3)
  // The bf16 ATen ops round after every op, so they land apart from it, within a few roundings.
  const double identical = bf16.p.eq(aten_ops.p).to(torch::kDouble).mean().item<double>();
  const double worst = ((bf16.p.to(torch::kDouble) - aten_ops.p.to(torch::kDouble)).abs().max() /
                        aten_ops.p.to(torch::kDouble).abs().max())
                           .item<double>();
  std::cout << "bf16 against the bf16 ATen ops: identical " << identical << ", worst relative "
            << worst << "\n";
  EXPECT_LT(worst, 4.0 / 128);
}

TEST(HostAdamWTest, UnpinnedStateKeepsTheAtenOps) {
  // CPU-device runs: the ATen ops bit for bit (the host loop differs in ~11 % of fp32 elements).
  State a = RandomState((int64_t{1} << 18) + 3, torch::kFloat, 9), b = a.Clone();
  for (int64_t step = 1; step <= 2; ++step) {
    AdamWUpdate(Hyper(), step, a.p, a.g, a.m, a.v);
    AdamWUpdateForState(Hyper(), step, b.p, b.g, b.m, b.v);
  }
  EXPECT_TRUE(torch::equal(a.p, b.p));
  EXPECT_TRUE(torch::equal(a.m, b.m));
  EXPECT_TRUE(torch::equal(a.v, b.v));
}

// fp32 master with its moments, and the parameter (master rounded) and gradient in `dtype`.
struct MasterState {
  torch::Tensor master, g, m, v, p;
  MasterState Clone() const { return {master.clone(), g.clone(), m.clone(), v.clone(), p.clone()}; }
};

MasterState RandomMasterState(int64_t n, torch::ScalarType dtype, uint64_t seed) {
  const State s = RandomState(n, torch::kFloat, seed);
  return {s.p, s.g.to(dtype), s.m, s.v, s.p.to(dtype)};
}

TEST(HostAdamWTest, MasterFormIsTheFp32LoopThenARoundingCopy) {
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat}) {
    MasterState a = RandomMasterState((int64_t{3} << 18) + 7, dtype, 11), b = a.Clone();
    for (int64_t step = 1; step <= 3; ++step) {
      HostAdamW(Hyper(), step, a.master, a.g.to(torch::kFloat), a.m, a.v);
      a.p.copy_(a.master);
      HostAdamWMaster(Hyper(), step, b.master, b.g, b.m, b.v, b.p);
    }
    EXPECT_TRUE(torch::equal(a.master, b.master)) << dtype;
    EXPECT_TRUE(torch::equal(a.m, b.m)) << dtype;
    EXPECT_TRUE(torch::equal(a.v, b.v)) << dtype;
    EXPECT_TRUE(torch::equal(a.p, b.p)) << dtype;
    // The step moved every parameter, so equality above is not the untouched start.
    EXPECT_FALSE(torch::equal(a.p, RandomMasterState((int64_t{3} << 18) + 7, dtype, 11).p))
        << dtype;
  }
}

TEST(HostAdamWTest, UnpinnedMasterStateKeepsTheAtenOps) {
  MasterState a = RandomMasterState((int64_t{1} << 18) + 3, torch::kBFloat16, 13), b = a.Clone();
  for (int64_t step = 1; step <= 2; ++step) {
    AdamWUpdate(Hyper(), step, a.master, a.g.to(torch::kFloat), a.m, a.v);
    a.p.copy_(a.master);
    AdamWMasterUpdateForState(Hyper(), step, b.master, b.g, b.m, b.v, b.p);
  }
  EXPECT_TRUE(torch::equal(a.master, b.master));
  EXPECT_TRUE(torch::equal(a.p, b.p));
  EXPECT_TRUE(torch::equal(a.v, b.v));
}

TEST(HostAdamWTest, MasterFormNeedsFp32StateAndOneParameterDtype) {
  const MasterState s = RandomMasterState(64, torch::kBFloat16, 1);
  EXPECT_TRUE(HostAdamWMasterSupported(s.master, s.g, s.m, s.v, s.p));
  EXPECT_FALSE(HostAdamWMasterSupported(s.master, s.g.to(torch::kFloat), s.m, s.v, s.p));
  EXPECT_FALSE(HostAdamWMasterSupported(s.master, s.g, s.m.to(torch::kBFloat16), s.v, s.p));
  EXPECT_FALSE(HostAdamWMasterSupported(s.master, s.g, s.m, s.v, s.p.narrow(0, 0, 32)));
  EXPECT_THROW(
      HostAdamWMaster(Hyper(), 1, s.master, s.g.to(torch::kHalf), s.m, s.v, s.p.to(torch::kHalf)),
      std::invalid_argument);
}

TEST(HostAdamWTest, SupportsOnlyOneContiguousFloatOrBf16Layout) {
  const State s = RandomState(64, torch::kFloat, 1);
  EXPECT_TRUE(HostAdamWSupported(s.p, s.g, s.m, s.v));
  EXPECT_FALSE(HostAdamWSupported(s.p, s.g.to(torch::kBFloat16), s.m, s.v));
  EXPECT_FALSE(HostAdamWSupported(s.p, s.g, s.m, s.v.narrow(0, 0, 32)));
  const torch::Tensor strided = torch::zeros({128}).slice(0, 0, 128, 2);
  EXPECT_FALSE(HostAdamWSupported(strided, s.g, s.m, s.v));
  const State d = RandomState(64, torch::kDouble, 1);
  EXPECT_FALSE(HostAdamWSupported(d.p, d.g, d.m, d.v));
  EXPECT_THROW(HostAdamW(Hyper(), 1, d.p, d.g, d.m, d.v), std::invalid_argument);
}

}  // namespace
}  // namespace vramlab::worker::optim_internal
