// FusedLinearCrossEntropy against the ATen path of worker/model/loss.cc for the same loss switch:
// one chunk of all rows against the full loss (logits in the parameter dtype, upcast to fp32,
// mean cross-entropy with ignored rows), smaller chunks against ChunkedLinearCrossEntropy (whose
// weight gradient, like the fused one's, is accumulated chunk by chunk in the parameter dtype).
// Loss and the gradients of hidden and weight, fp32 and bf16, a real vocabulary, ignored rows,
// an incoming gradient other than 1, no-grad mode and a frozen weight.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/fused_ops.h"
#include "kernels/kernel_test_util.h"
#include "worker/model/loss.h"

namespace vramlab::kernels {
namespace {

using testing::Input;
using testing::Leaf;
using testing::RandomInput;

constexpr int64_t kIgnore = -100;

torch::Tensor AtenLoss(const torch::Tensor& hidden, const torch::Tensor& weight,
                       const torch::Tensor& targets) {
  const torch::ScalarType compute =
      hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor logits = torch::linear(hidden, weight).to(compute);
  return torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnore));
}

// Targets in [0, vocab), every `ignore_every`-th one ignored (0: none).
torch::Tensor Targets(int64_t n, int64_t vocab, int64_t ignore_every, uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor t = torch::randint(vocab, {n}, torch::TensorOptions().dtype(torch::kInt64));
  if (ignore_every > 0) t.slice(0, 0, n, ignore_every).fill_(kIgnore);
  return t.to(torch::kCUDA);
}

// kAten: the worker's loss for `chunk` (the full loss when one chunk holds every row); kFull: the
// full loss (fp64 with fp64 inputs: the exact result).
enum class Path { kFused, kAten, kFull };

// loss, dhidden, dweight.
std::vector<torch::Tensor> RunOp(Path path, int64_t chunk, const torch::Tensor& hidden_in,
                                 const torch::Tensor& weight_in, const torch::Tensor& targets,
                                 double grad_scale = 1.0) {
  torch::Tensor hidden = Leaf(hidden_in), weight = Leaf(weight_in);
  torch::Tensor loss;
  if (path == Path::kFused) {
    loss = FusedLinearCrossEntropy(hidden, weight, targets, chunk, kIgnore);
  } else if (path == Path::kAten && chunk < hidden.size(0)) {
    loss = worker::ChunkedLinearCrossEntropy(hidden, weight, targets, chunk);
  } else {
    loss = AtenLoss(hidden, weight, targets);
  }
  (loss * grad_scale).backward();
  return {loss.detach(), hidden.grad(), weight.grad()};
}

void CheckShape(torch::ScalarType dtype, int64_t n, int64_t h, int64_t vocab, int64_t chunk,
                int64_t ignore_every) {
  SCOPED_TRACE(::testing::Message()
               << "dtype " << dtype << ", hidden [" << n << ", " << h << "], vocab " << vocab
               << ", chunk " << chunk << ", every " << ignore_every << "th row ignored");
  const Input hidden = RandomInput({n, h}, dtype, 31);
  const Input weight = RandomInput({vocab, h}, dtype, 32, 0.05);
  const torch::Tensor targets = Targets(n, vocab, ignore_every, 33);
  const std::vector<torch::Tensor> fused =
      RunOp(Path::kFused, chunk, hidden.low, weight.low, targets);
  EXPECT_EQ(fused[0].scalar_type(), torch::kFloat32);
  testing::ExpectAccepted({"loss", "dhidden", "dweight"}, fused,
                          RunOp(Path::kAten, chunk, hidden.low, weight.low, targets),
                          RunOp(Path::kFull, chunk, hidden.exact, weight.exact, targets));
}

TEST(FusedLinearCrossEntropyTest, MatchesAtenInFp32AndBf16) {
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    CheckShape(dtype, 300, 64, 1000, 64, 7);    // chunks that do not divide the rows
    CheckShape(dtype, 300, 64, 1000, 300, 0);   // one chunk (training.loss FULL)
    CheckShape(dtype, 300, 64, 1000, 1024, 3);  // a chunk larger than the rows
    CheckShape(dtype, 5, 16, 37, 2, 0);         // a vocabulary that is no multiple of 32
  }
}

// Qwen2.5's vocabulary and hidden size, the worker's default chunk.
TEST(FusedLinearCrossEntropyTest, MatchesAtenWithTheQwenVocabulary) {
  CheckShape(torch::kBFloat16, 2048, 1536, 151936, 1024, 97);
}

TEST(FusedLinearCrossEntropyTest, ScalesByTheIncomingGradient) {
  const Input hidden = RandomInput({40, 32}, torch::kFloat32, 34);
  const Input weight = RandomInput({100, 32}, torch::kFloat32, 35, 0.1);
  const torch::Tensor targets = Targets(40, 100, 5, 36);
  testing::ExpectNearAten({"loss", "dhidden", "dweight"},
                          RunOp(Path::kFused, 16, hidden.low, weight.low, targets, 3.0),
                          RunOp(Path::kFull, 16, hidden.low, weight.low, targets, 3.0));
}

TEST(FusedLinearCrossEntropyTest, NoGradModeAndFrozenWeightGiveTheSameLoss) {
  const Input hidden = RandomInput({40, 32}, torch::kFloat32, 37);
  const Input weight = RandomInput({100, 32}, torch::kFloat32, 38, 0.1);
  const torch::Tensor targets = Targets(40, 100, 0, 39);
  const torch::Tensor expected = AtenLoss(hidden.low, weight.low, targets);
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(testing::NearAten(
        "loss (no grad)", FusedLinearCrossEntropy(hidden.low, weight.low, targets, 16, kIgnore),
        expected));
  }
  // A frozen lm_head (adapters): only hidden gets a gradient.
  torch::Tensor h = Leaf(hidden.low);
  torch::Tensor loss = FusedLinearCrossEntropy(h, weight.low, targets, 16, kIgnore);
  loss.backward();
  EXPECT_TRUE(testing::NearAten("loss (frozen weight)", loss.detach(), expected));
  torch::Tensor h_ref = Leaf(hidden.low);
  AtenLoss(h_ref, weight.low, targets).backward();
  EXPECT_TRUE(testing::NearAten("dhidden (frozen weight)", h.grad(), h_ref.grad()));
}

TEST(FusedLinearCrossEntropyTest, RefusesMismatchedArguments) {
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor hidden = torch::ones({4, 8}, opts), weight = torch::ones({10, 8}, opts);
  const torch::Tensor targets = torch::zeros({4}, opts.dtype(torch::kInt64));
  EXPECT_THROW(FusedLinearCrossEntropy(hidden, torch::ones({10, 7}, opts), targets, 2, kIgnore),
               c10::Error);
  EXPECT_THROW(FusedLinearCrossEntropy(hidden, weight, targets.slice(0, 0, 3), 2, kIgnore),
               c10::Error);
  EXPECT_THROW(FusedLinearCrossEntropy(hidden, weight, targets.to(torch::kInt32), 2, kIgnore),
               c10::Error);
  EXPECT_THROW(FusedLinearCrossEntropy(hidden, weight, targets, 0, kIgnore), c10::Error);
}

}  // namespace
}  // namespace vramlab::kernels
