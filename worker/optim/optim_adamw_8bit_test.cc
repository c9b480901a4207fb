// 8-bit AdamW: the dynamic quantization maps, the round-trip error of block-wise quantization,
// and training that tracks exact AdamW on the tiny model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_model.h"
#include "worker/optim/blockwise_quantizer.h"
#include "worker/optim/optim_test_util.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker {
namespace {

using optim_internal::DequantizeBlockwise;
using optim_internal::DynamicMapValues;
using optim_internal::kQuantBlockSize;
using optim_internal::NumQuantBlocks;
using optim_internal::QuantizationMap;
using optim_internal::QuantizeBlockwise;

TEST(DynamicMapTest, SignedMapCoversMinusOneToOne) {
  const std::vector<float> values = DynamicMapValues(/*is_signed=*/true);
  ASSERT_EQ(values.size(), 256u);
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
  EXPECT_EQ(values.back(), 1.0f);
  EXPECT_NEAR(values.front(), -0.99297, 1e-4);  // the largest mantissa of the top decade
  EXPECT_EQ(std::count(values.begin(), values.end(), 0.0f), 1);
  // Smallest magnitude: the first mantissa of the 1e-6 decade, (0.1 + 1) / 2 * 1e-6.
  float smallest = 1;
  for (float v : values) {
    if (v != 0) smallest = std::min(smallest, std::fabs(v));
  }
  EXPECT_NEAR(smallest, 0.55e-6, 1e-9);
}

TEST(DynamicMapTest, UnsignedMapCoversZeroToOne) {
  const std::vector<float> values = DynamicMapValues(/*is_signed=*/false);
  ASSERT_EQ(values.size(), 256u);
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
  EXPECT_EQ(values.front(), 0.0f);
  EXPECT_EQ(values.back(), 1.0f);
  EXPECT_EQ(std::adjacent_find(values.begin(), values.end()), values.end());  // all distinct
}

// Every value decodes to one of the two map entries around value / absmax, so its error is at
// most half their gap times the block's absmax; zero stays exactly zero and a positive block
// maximum decodes exactly (it normalizes to the map's 1.0).
void ExpectRoundTripWithinLocalGap(bool is_signed, const torch::Tensor& values) {
  const QuantizationMap map(is_signed, torch::kCPU);
  const int64_t n = values.numel();
  torch::Tensor codes = torch::empty({n}, torch::kByte);
  torch::Tensor absmax = torch::empty({NumQuantBlocks(n)});
  QuantizeBlockwise(values, map, codes, absmax);
  const torch::Tensor decoded = DequantizeBlockwise(codes, absmax, map);

  const std::vector<float> table = DynamicMapValues(is_signed);
  auto x = values.accessor<float, 1>();
  auto y = decoded.accessor<float, 1>();
  auto scale = absmax.accessor<float, 1>();
  for (int64_t i = 0; i < n; ++i) {
    const float block_absmax = scale[i / kQuantBlockSize];
    const float normalized = block_absmax == 0 ? 0 : x[i] / block_absmax;
    auto upper = std::lower_bound(table.begin(), table.end(), normalized);
    // Below the map's most negative value (-1 is not in the signed map) the nearest is that value.
    const double gap = upper == table.begin() ? 2.0 * (table.front() - normalized)
                                              : static_cast<double>(*upper) - *(upper - 1);
    const double bound = 0.5 * gap * block_absmax + 1e-6 * block_absmax + 1e-30;
    ASSERT_LE(std::fabs(x[i] - y[i]), bound) << "element " << i << " value " << x[i];
    if (x[i] == 0) ASSERT_EQ(y[i], 0.0f) << i;
    if (x[i] == block_absmax && x[i] > 0) ASSERT_EQ(y[i], x[i]) << i;
  }
}

TEST(BlockwiseQuantizerTest, SignedRoundTripWithinLocalGap) {
  torch::manual_seed(3);
  // Magnitudes over six decades, a partial last block, one all-zero block.
  const int64_t n = 5 * kQuantBlockSize + 77;
  torch::Tensor values = torch::randn({n}) * torch::pow(10.0, torch::rand({n}) * -6);
  values.narrow(0, kQuantBlockSize, kQuantBlockSize).zero_();
  ExpectRoundTripWithinLocalGap(true, values);
}

TEST(BlockwiseQuantizerTest, UnsignedRoundTripWithinLocalGap) {
  torch::manual_seed(4);
  const int64_t n = 3 * kQuantBlockSize + 5;
  torch::Tensor values = torch::rand({n}) * torch::pow(10.0, torch::rand({n}) * -6);
  ExpectRoundTripWithinLocalGap(false, values);
}

// The dynamic map keeps small values relative to the block maximum far better than a linear
// 8-bit grid would (whose step is absmax / 127).
TEST(BlockwiseQuantizerTest, SmallValuesKeepRelativePrecision) {
  const QuantizationMap map(true, torch::kCPU);
  torch::Tensor values = torch::full({kQuantBlockSize}, 3e-4f);
  values[0] = 1.0f;
  torch::Tensor codes = torch::empty({kQuantBlockSize}, torch::kByte);
  torch::Tensor absmax = torch::empty({1});
  QuantizeBlockwise(values, map, codes, absmax);
  const float decoded = DequantizeBlockwise(codes, absmax, map)[1].item<float>();
  // The signed map's 1e-4 decade has 8 mantissas, so the nearest value is within 12% (a linear
  // grid, with its step of 1/127, would give 0).
  EXPECT_NEAR(decoded, 3e-4f, 0.12 * 3e-4);
}

// Loss after `steps` AdamW steps of `kind` on the tiny model and a fixed batch.
double TrainTiny(OptimizerKind kind, int steps, double* first_loss, int64_t* state_bytes) {
  Qwen2ForCausalLM model(PresetConfig("tiny"), ModelOptions{});
  InitializeWeights(*model, /*seed=*/11, /*std=*/0.02);
  torch::manual_seed(12);
  const torch::Tensor ids = torch::randint(0, 512, {2, 32}, torch::kLong);
  auto optimizer =
      MakeOptimizer(optim_testing::NamedParameters(*model), optim_testing::Options(kind, 1e-3));
  double loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    torch::Tensor loss = CausalLmLoss(model, ids, ids, LossImpl::kFull, 0);
    loss_value = loss.item<double>();
    if (step == 0) *first_loss = loss_value;
    loss.backward();
    optimizer->Step();
    optimizer->ZeroGrad();
  }
  *state_bytes = optimizer->DeviceStateBytes();
  return loss_value;
}

TEST(AdamW8bitTrainingTest, FiftyStepsTrackExactAdamWWithinTwoPercent) {
  double first_exact = 0, first_8bit = 0;
  int64_t exact_bytes = 0, bytes_8bit = 0;
  const double exact = TrainTiny(OptimizerKind::kAdamW, 50, &first_exact, &exact_bytes);
  const double eight = TrainTiny(OptimizerKind::kAdamW8bit, 50, &first_8bit, &bytes_8bit);
  EXPECT_EQ(first_exact, first_8bit);  // same model, same data
  EXPECT_LT(exact, 0.8 * first_exact) << "the run must actually train";
  EXPECT_NEAR(eight, exact, 0.02 * exact);
  std::cout << "tiny model, 50 steps: first loss " << first_exact << ", exact AdamW " << exact
            << ", 8-bit AdamW " << eight << " (" << 100 * (eight - exact) / exact << "%); state "
            << exact_bytes << " vs " << bytes_8bit << " bytes\n";
  // Most of the tiny model sits in tensors of >= 4096 elements: well under half of fp32 state.
  EXPECT_LT(bytes_8bit * 2, exact_bytes);
}

}  // namespace
}  // namespace vramlab::worker
