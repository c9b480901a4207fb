// FusedRmsNorm against the ATen path (HF Qwen2RMSNorm as worker/model/qwen2_layers.cc computes
// it): output and both gradients, fp32 and bf16, by kernel_test_util.h's rules.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/fused_ops.h"
#include "kernels/kernel_test_util.h"

namespace vramlab::kernels {
namespace {

using testing::Input;
using testing::Leaf;
using testing::RandomInput;

// The ATen path; fp64 inputs stay fp64 throughout (the exact result).
torch::Tensor AtenRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::ScalarType compute =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor h = x.to(compute);
  torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

// y, dx, dweight.
std::vector<torch::Tensor> RunOp(bool fused, const torch::Tensor& x_in, const torch::Tensor& w_in,
                                 const torch::Tensor& dy, double eps) {
  torch::Tensor x = Leaf(x_in), w = Leaf(w_in);
  torch::Tensor y = fused ? FusedRmsNorm(x, w, eps) : AtenRmsNorm(x, w, eps);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad()};
}

void CheckShape(torch::ScalarType dtype, std::vector<int64_t> shape) {
  SCOPED_TRACE(::testing::Message() << "dtype " << dtype << ", x " << torch::IntArrayRef(shape));
  const double eps = 1e-6;
  const int64_t dim = shape.back();
  const Input x = RandomInput(shape, dtype, 1);
  const Input w = RandomInput({dim}, dtype, 2, 0.1, 1.0);
  const Input dy = RandomInput(shape, dtype, 3);
  testing::ExpectAccepted({"y", "dx", "dweight"}, RunOp(true, x.low, w.low, dy.low, eps),
                          RunOp(false, x.low, w.low, dy.low, eps),
                          RunOp(false, x.exact, w.exact, dy.exact, eps));
}

TEST(FusedRmsNormTest, MatchesAtenInFp32AndBf16) {
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    CheckShape(dtype, {2, 64, 1536});  // the 1.5B hidden size
    CheckShape(dtype, {7, 3584});      // the 7B hidden size
    CheckShape(dtype, {3, 5, 100});    // a width that is no multiple of 32
    CheckShape(dtype, {1, 8});         // one row, fewer elements than a warp
  }
}

// The whole micro-batch of the benchmark shape: the weight gradient sums 8192 rows.
TEST(FusedRmsNormTest, MatchesAtenOnABenchmarkMicroBatch) {
  CheckShape(torch::kBFloat16, {4, 2048, 1536});
}

TEST(FusedRmsNormTest, NonContiguousInputIsCopiedFirst) {
  const Input base = RandomInput({64, 40}, torch::kFloat32, 4);
  const torch::Tensor x = base.low.t();  // [40, 64], strided
  ASSERT_FALSE(x.is_contiguous());
  const Input w = RandomInput({64}, torch::kFloat32, 5, 0.1, 1.0);
  const Input dy = RandomInput({40, 64}, torch::kFloat32, 6);
  testing::ExpectNearAten({"y", "dx", "dweight"}, RunOp(true, x, w.low, dy.low, 1e-6),
                          RunOp(false, x, w.low, dy.low, 1e-6));
}

TEST(FusedRmsNormTest, RefusesMismatchedArguments) {
  const torch::Tensor x = torch::ones({4, 16}, torch::TensorOptions().device(torch::kCUDA));
  EXPECT_THROW(FusedRmsNorm(x, torch::ones({8}, x.options()), 1e-6), c10::Error);
  EXPECT_THROW(FusedRmsNorm(x, torch::ones({16}, x.options().dtype(torch::kBFloat16)), 1e-6),
               c10::Error);
  EXPECT_THROW(FusedRmsNorm(x.cpu(), torch::ones({16}), 1e-6), c10::Error);
  EXPECT_THROW(FusedRmsNorm(x.to(torch::kFloat64),
                            torch::ones({16}, x.options().dtype(torch::kFloat64)), 1e-6),
               c10::Error);
}

}  // namespace
}  // namespace vramlab::kernels
