// FusedSwiGlu against the ATen path (silu(gate) * up): output and both gradients, fp32 and bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/fused_ops.h"
#include "kernels/kernel_test_util.h"

namespace vramlab::kernels {
namespace {

using testing::Input;
using testing::Leaf;
using testing::RandomInput;

// out, dgate, dup.
std::vector<torch::Tensor> RunOp(bool fused, const torch::Tensor& gate_in,
                                 const torch::Tensor& up_in, const torch::Tensor& dout) {
  torch::Tensor gate = Leaf(gate_in), up = Leaf(up_in);
  torch::Tensor out = fused ? FusedSwiGlu(gate, up) : torch::silu(gate) * up;
  out.backward(dout);
  return {out.detach(), gate.grad(), up.grad()};
}

void CheckShape(torch::ScalarType dtype, std::vector<int64_t> shape) {
  SCOPED_TRACE(::testing::Message()
               << "dtype " << dtype << ", shape " << torch::IntArrayRef(shape));
  // Gate values well into both tails of the sigmoid.
  const Input gate = RandomInput(shape, dtype, 11, 4.0);
  const Input up = RandomInput(shape, dtype, 12);
  const Input dout = RandomInput(shape, dtype, 13);
  testing::ExpectAccepted({"out", "dgate", "dup"}, RunOp(true, gate.low, up.low, dout.low),
                          RunOp(false, gate.low, up.low, dout.low),
                          RunOp(false, gate.exact, up.exact, dout.exact));
}

TEST(FusedSwiGluTest, MatchesAtenInFp32AndBf16) {
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    CheckShape(dtype, {2, 257, 8960});  // the 1.5B intermediate size
    CheckShape(dtype, {3, 5});
  }
}

TEST(FusedSwiGluTest, NonContiguousInputsAreCopiedFirst) {
  const Input gate = RandomInput({96, 32}, torch::kFloat32, 14);
  const Input up = RandomInput({96, 32}, torch::kFloat32, 15);
  const Input dout = RandomInput({32, 96}, torch::kFloat32, 16);
  testing::ExpectNearAten({"out", "dgate", "dup"}, RunOp(true, gate.low.t(), up.low.t(), dout.low),
                          RunOp(false, gate.low.t(), up.low.t(), dout.low));
}

TEST(FusedSwiGluTest, RefusesMismatchedShapes) {
  const torch::Tensor a = torch::ones({4, 16}, torch::TensorOptions().device(torch::kCUDA));
  EXPECT_THROW(FusedSwiGlu(a, torch::ones({4, 8}, a.options())), c10::Error);
  EXPECT_THROW(FusedSwiGlu(a, a.to(torch::kBFloat16)), c10::Error);
}

}  // namespace
}  // namespace vramlab::kernels
