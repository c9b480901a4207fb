// NF4 storage (nf4.h): the published codebook, nearest-value quantisation against it, exact
// storage bytes, the round-trip error the format allows, and a matmul whose backward dequantises
// again.
#include "worker/adapters/nf4.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/spec/adapter_sizes.h"
#include "worker/adapters/nf4_linear.h"

namespace vramlab::worker {
namespace {

std::shared_ptr<const Nf4Tables> Tables(torch::Dtype dtype = torch::kFloat32) {
  return std::make_shared<const Nf4Tables>(dtype, torch::kCPU);
}

torch::Tensor CodebookTensor() {
  const auto& cb = Nf4Codebook();
  return torch::tensor(std::vector<float>(cb.begin(), cb.end()));
}

TEST(Nf4Test, CodebookIsThePapersNormalFloatTable) {
  const auto& cb = Nf4Codebook();
  EXPECT_EQ(cb.front(), -1.0f);
  EXPECT_EQ(cb[7], 0.0f);
  EXPECT_EQ(cb.back(), 1.0f);
  for (size_t i = 1; i < cb.size(); ++i) EXPECT_LT(cb[i - 1], cb[i]);
  // Spot values of QLoRA's appendix E / bitsandbytes' NF4 table.
  EXPECT_FLOAT_EQ(cb[1], -0.6961928009986877f);
  EXPECT_FLOAT_EQ(cb[8], 0.07958029955625534f);
  EXPECT_FLOAT_EQ(cb[14], 0.7229568362236023f);
}

TEST(Nf4Test, CodebookValuesRoundTripExactly) {
  // One block: the double-quantised absmax is its own mean, so it decodes exactly.
  torch::Tensor block =
      torch::cat({CodebookTensor(), CodebookTensor().flip(0), CodebookTensor(), CodebookTensor()}) *
      3.0f;
  Nf4Tensor q = QuantizeNf4(block.view({4, 16}), Tables());
  EXPECT_TRUE(torch::equal(DequantizeNf4(q), block.view({4, 16})));
  // First element in the high nibble: codes 0 and 1 -> 0x01.
  EXPECT_EQ(q.codes[0].item<int>(), 0x01);
}

TEST(Nf4Test, StorageBytesAreExact) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{7, 9}, {100, 130}, {512, 512}, {64, 4160}}) {
    torch::Tensor w = torch::randn(shape);
    Nf4Tensor q = QuantizeNf4(w, Tables());
    const int64_t n = w.numel();
    const int64_t blocks = (n + 63) / 64;
    EXPECT_EQ(q.code_bytes(), (n + 1) / 2) << n;
    EXPECT_EQ(q.constant_bytes(), blocks + 4 * ((blocks + 255) / 256)) << n;
    EXPECT_EQ(q.code_bytes(), spec_rules::Nf4CodeBytes(n));
    EXPECT_EQ(q.constant_bytes(), spec_rules::Nf4ConstantBytes(n));
  }
  // The shared tables: [256, 2] codebook pairs in the compute dtype, 256 + 255 fp32 map entries.
  EXPECT_EQ(Tables(torch::kBFloat16)->bytes(), 256 * 2 * 2 + (256 + 255) * 4);
  // 7B's MLP weight, 3584 x 18944: 4.127 bits per element.
  const int64_t n = int64_t{3584} * 18944;
  EXPECT_EQ(spec_rules::Nf4CodeBytes(n) + spec_rules::Nf4ConstantBytes(n),
            33947648 + 1060864 + 16576);
}

TEST(Nf4Test, EachElementTakesTheNearestCodebookValue) {
  torch::manual_seed(3);
  torch::Tensor w = torch::randn({256, 320}) * 0.02;
  Nf4Tensor q = QuantizeNf4(w, Tables());
  const torch::Tensor absmax = Nf4Absmax(q);
  const torch::Tensor true_absmax = w.view({-1, 64}).abs().amax(1);
  // The double quantisation of the absmax values is close (8-bit dynamic map, blocks of 256).
  EXPECT_LE(((absmax - true_absmax).abs() / true_absmax).max().item<double>(), 0.02);
  // Against the codebook: the index stored is the nearest value to w / absmax(block).
  torch::Tensor normalized = (w.view({-1, 64}) / true_absmax.unsqueeze(1)).view({-1, 1});
  torch::Tensor distance = (normalized - CodebookTensor().view({1, 16})).abs();
  torch::Tensor nearest = std::get<1>(distance.min(1));
  torch::Tensor high = q.codes.to(torch::kInt64).div(16, "floor");
  torch::Tensor low = q.codes.to(torch::kInt64).remainder(16);
  torch::Tensor stored = torch::stack({high, low}, 1).view({-1});
  torch::Tensor best = std::get<0>(distance.min(1));
  torch::Tensor chosen = distance.gather(1, stored.view({-1, 1})).view({-1});
  EXPECT_LE((chosen - best).abs().max().item<double>(), 1e-6);
  EXPECT_GE((stored == nearest).to(torch::kFloat64).mean().item<double>(), 0.999);
}

TEST(Nf4Test, RoundTripErrorIsBoundedByTheCodebookSpacing) {
  torch::manual_seed(4);
  torch::Tensor w = torch::randn({128, 448});
  Nf4Tensor q = QuantizeNf4(w, Tables());
  torch::Tensor back = DequantizeNf4(q);
  ASSERT_EQ(back.sizes(), w.sizes());
  // Per element: half the widest codebook gap (-1.0 .. -0.6962) times the block absmax, plus the
  // absmax's own decoding error.
  const torch::Tensor true_absmax = w.view({-1, 64}).abs().amax(1, true);
  const torch::Tensor absmax_error = (Nf4Absmax(q).unsqueeze(1) - true_absmax).abs();
  const double half_gap = (1.0 - 0.6961928009986877) / 2;
  torch::Tensor bound = half_gap * true_absmax + absmax_error + 1e-6;
  EXPECT_TRUE(((back - w).view({-1, 64}).abs() <= bound).all().item<bool>());
  // For normal data the RMS error is about a tenth of the standard deviation.
  const double rms = (back - w).pow(2).mean().sqrt().item<double>();
  EXPECT_LT(rms, 0.12);
  EXPECT_GT(rms, 0.05);
  // With bf16 compute tables: the same codes, the fp32 result to bf16 precision.
  Nf4Tensor bf16 = q;
  bf16.tables = Tables(torch::kBFloat16);
  const torch::Tensor back16 = DequantizeNf4(bf16);
  EXPECT_EQ(back16.scalar_type(), torch::kBFloat16);
  EXPECT_LE((back16.to(torch::kFloat32) - back).abs().max().item<double>(),
            back.abs().max().item<double>() / 64);
}

TEST(Nf4Test, MatmulBackwardGivesTheInputGradientOfTheDequantisedWeight) {
  torch::manual_seed(5);
  torch::Tensor w = torch::randn({48, 64});
  Nf4Tensor q = QuantizeNf4(w, Tables());
  torch::Tensor x = torch::randn({2, 3, 64}, torch::requires_grad());
  torch::Tensor y = Nf4Matmul(x, &q);
  torch::Tensor grad = torch::randn_like(y);
  y.backward(grad);
  torch::Tensor x2 = x.detach().clone().requires_grad_(true);
  torch::Tensor dense = DequantizeNf4(q);
  torch::Tensor y2 = torch::linear(x2, dense);
  y2.backward(grad);
  EXPECT_LE((y - y2).abs().max().item<double>(), 1e-6);
  EXPECT_LE((x.grad() - x2.grad()).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace vramlab::worker
