// FusedLinearCrossEntropy: per chunk, the logits from cuBLAS (at::mm), the loss and the logits'
// gradient from kernels/cuda/cross_entropy.cu, the gradients of hidden and weight from cuBLAS.
#include <algorithm>

#include <c10/cuda/CUDAGuard.h>

#include "kernels/fused_ops.h"
#include "kernels/tensor_args.h"

namespace vramlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "FusedLinearCrossEntropy";

// The loss is the graph's last op, so its gradient is formed in the forward, one chunk's logits
// at a time, assuming an incoming gradient of 1; backward only scales it. Saved for backward:
// the gradients of hidden [n, h] and weight [v, h] (each undefined when not wanted), parameter
// dtype.
class LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden_in,
                               const torch::Tensor& weight_in, const torch::Tensor& targets_in,
                               int64_t chunk_tokens, int64_t ignore_index, bool grad_hidden_wanted,
                               bool grad_weight_wanted) {
    const c10::cuda::CUDAGuard guard(hidden_in.device());
    const torch::Tensor hidden = hidden_in.contiguous();
    const torch::Tensor weight = weight_in.contiguous();
    const torch::Tensor targets = targets_in.contiguous();
    const int64_t n = hidden.size(0), vocab = weight.size(0);
    const bool write_grad = grad_hidden_wanted || grad_weight_wanted;
    // A tensor, not .item(): no device synchronization inside the step.
    const torch::Tensor count = targets.ne(ignore_index).sum().to(torch::kFloat32);
    torch::Tensor row_loss = torch::empty({n}, hidden.options().dtype(torch::kFloat32));
    torch::Tensor grad_hidden = grad_hidden_wanted ? torch::empty_like(hidden) : torch::Tensor();
    torch::Tensor grad_weight;
    const cuda::ElementType type = ElementTypeOf(hidden, kOp);
    const cudaStream_t stream = StreamOf(hidden.device());
    for (int64_t start = 0; start < n; start += chunk_tokens) {
      const int64_t end = std::min(n, start + chunk_tokens);
      const torch::Tensor h = hidden.slice(0, start, end);
      torch::Tensor logits = torch::mm(h, weight.t());  // [chunk, vocab], contiguous
      CheckLaunch(cuda::CrossEntropyChunk(
                      type, logits.data_ptr(), targets.data_ptr<int64_t>() + start, ignore_index,
                      count.data_ptr<float>(), row_loss.data_ptr<float>() + start, end - start,
                      vocab, write_grad, stream),
                  kOp);
      if (!write_grad) continue;
      // `logits` now holds d(loss)/d(logits) for these rows.
      if (grad_hidden_wanted) {
        torch::Tensor rows =
            grad_hidden.slice(0, start, end);  // contiguous rows of a contiguous tensor
        torch::mm_out(rows, logits, weight);
      }
      if (grad_weight_wanted) {
        if (!grad_weight.defined()) {
          grad_weight = torch::mm(logits.t(), h);
        } else {
          grad_weight.addmm_(logits.t(), h);
        }
      }
    }
    if (grad_weight_wanted && !grad_weight.defined())
      grad_weight = torch::zeros_like(weight);  // n == 0
    ctx->save_for_backward({grad_hidden, grad_weight});
    return row_loss.sum() / count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& scale = grad_outputs[0];
    torch::Tensor grad_hidden = saved[0].defined() ? saved[0].mul_(scale) : torch::Tensor();
    torch::Tensor grad_weight = saved[1].defined() ? saved[1].mul_(scale) : torch::Tensor();
    return {grad_hidden,     grad_weight,     torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor FusedLinearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_tokens,
                                      int64_t ignore_index) {
  TORCH_CHECK(hidden.defined() && hidden.is_cuda(), kOp, ": hidden must be a CUDA tensor");
  ElementTypeOf(hidden, kOp);
  CheckCudaTensor(weight, kOp, "weight", hidden.device(), hidden.scalar_type());
  CheckCudaTensor(targets, kOp, "targets", hidden.device(), torch::kInt64);
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1) &&
                  targets.dim() == 1 && targets.size(0) == hidden.size(0),
              kOp, ": expected hidden [n, h], weight [v, h], targets [n], got ", hidden.sizes(),
              ", ", weight.sizes(), ", ", targets.sizes());
  TORCH_CHECK(chunk_tokens > 0, kOp, ": chunk_tokens must be > 0, got ", chunk_tokens);
  const bool grad_mode = torch::GradMode::is_enabled();
  return LinearCrossEntropyFunction::apply(hidden, weight, targets, chunk_tokens, ignore_index,
                                           grad_mode && hidden.requires_grad(),
                                           grad_mode && weight.requires_grad());
}

}  // namespace vramlab::kernels
