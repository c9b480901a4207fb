// FusedRotary against the ATen path (HF apply_rotary_pos_emb on [b, heads, s, d] views, as
// worker/model/qwen2_layers.cc computes it): rotated q and k and their gradients, fp32 and bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/fused_ops.h"
#include "kernels/kernel_test_util.h"

namespace vramlab::kernels {
namespace {

using testing::Input;
using testing::Leaf;
using testing::RandomInput;

// HF's tables for positions 0..s-1, computed in fp32 and stored in `dtype` (MakeDecoderInputs).
std::pair<torch::Tensor, torch::Tensor> Tables(int64_t s, int64_t d, torch::ScalarType dtype) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  torch::Tensor exponents =
      torch::arange(0, d, 2, f32.dtype(torch::kInt64)).to(torch::kFloat32) / static_cast<double>(d);
  torch::Tensor inv_freq = 1.0 / torch::pow(1e6, exponents);
  torch::Tensor freqs = torch::outer(torch::arange(s, f32), inv_freq);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

// x [b, s, h, d] -> rotated, same layout, via the ATen path's [b, h, s, d] view.
torch::Tensor AtenRotary(const torch::Tensor& x4, const torch::Tensor& cos,
                         const torch::Tensor& sin) {
  const torch::Tensor x = x4.transpose(1, 2);
  const int64_t half = x.size(-1) / 2;
  const torch::Tensor rotated = torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
  return (x * cos + rotated * sin).transpose(1, 2);
}

// Rotated q and k, dq, dk.
std::vector<torch::Tensor> RunOp(bool fused, const torch::Tensor& q_in, const torch::Tensor& k_in,
                                 const torch::Tensor& cos, const torch::Tensor& sin,
                                 const torch::Tensor& dq, const torch::Tensor& dk) {
  torch::Tensor q = Leaf(q_in), k = Leaf(k_in);
  torch::Tensor q_out, k_out;
  if (fused) {
    std::tie(q_out, k_out) = FusedRotary(q, k, cos, sin);
  } else {
    q_out = AtenRotary(q, cos, sin);
    k_out = AtenRotary(k, cos, sin);
  }
  torch::autograd::backward({q_out, k_out}, {dq, dk});
  return {q_out.detach(), k_out.detach(), q.grad(), k.grad()};
}

void CheckShape(torch::ScalarType dtype, int64_t b, int64_t s, int64_t heads, int64_t kv_heads,
                int64_t d) {
  SCOPED_TRACE(::testing::Message() << "dtype " << dtype << ", b " << b << ", s " << s << ", heads "
                                    << heads << "/" << kv_heads << ", d " << d);
  const Input q = RandomInput({b, s, heads, d}, dtype, 21);
  const Input k = RandomInput({b, s, kv_heads, d}, dtype, 22);
  const Input dq = RandomInput({b, s, heads, d}, dtype, 23);
  const Input dk = RandomInput({b, s, kv_heads, d}, dtype, 24);
  const auto [cos, sin] = Tables(s, d, dtype);
  const std::vector<torch::Tensor> fused = RunOp(true, q.low, k.low, cos, sin, dq.low, dk.low);
  EXPECT_TRUE(fused[0].is_contiguous() && fused[1].is_contiguous());
  testing::ExpectAccepted({"q", "k", "dq", "dk"}, fused,
                          RunOp(false, q.low, k.low, cos, sin, dq.low, dk.low),
                          RunOp(false, q.exact, k.exact, cos.to(torch::kFloat64),
                                sin.to(torch::kFloat64), dq.exact, dk.exact));
}

TEST(FusedRotaryTest, MatchesAtenInFp32AndBf16) {
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    CheckShape(dtype, 2, 2048, 12, 2, 128);  // the 1.5B attention shape at the benchmark's length
    CheckShape(dtype, 3, 17, 4, 4, 64);
    CheckShape(dtype, 1, 1, 1, 1, 2);
  }
}

// The gradient arriving from attention's backward is often strided: copied to contiguous first.
TEST(FusedRotaryTest, StridedGradientIsAccepted) {
  const Input q = RandomInput({2, 8, 4, 16}, torch::kFloat32, 25);
  const Input k = RandomInput({2, 8, 2, 16}, torch::kFloat32, 26);
  const auto [cos, sin] = Tables(8, 16, torch::kFloat32);
  const torch::Tensor dq = RandomInput({2, 4, 8, 16}, torch::kFloat32, 27).low.transpose(1, 2);
  const torch::Tensor dk = RandomInput({2, 2, 8, 16}, torch::kFloat32, 28).low.transpose(1, 2);
  ASSERT_FALSE(dq.is_contiguous());
  testing::ExpectNearAten({"q", "k", "dq", "dk"}, RunOp(true, q.low, k.low, cos, sin, dq, dk),
                          RunOp(false, q.low, k.low, cos, sin, dq, dk));
}

TEST(FusedRotaryTest, RefusesMismatchedShapes) {
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor q = torch::ones({1, 8, 4, 16}, opts), k = torch::ones({1, 8, 2, 16}, opts);
  const torch::Tensor table = torch::ones({8, 16}, opts);
  EXPECT_THROW(FusedRotary(q, torch::ones({1, 8, 2, 8}, opts), table, table), c10::Error);
  EXPECT_THROW(FusedRotary(q, k, torch::ones({7, 16}, opts), table), c10::Error);
  EXPECT_THROW(FusedRotary(torch::ones({1, 8, 4, 15}, opts), torch::ones({1, 8, 2, 15}, opts),
                           torch::ones({8, 15}, opts), torch::ones({8, 15}, opts)),
               c10::Error);
}

}  // namespace
}  // namespace vramlab::kernels
