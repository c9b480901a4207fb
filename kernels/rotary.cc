// FusedRotary: kernels/cuda/rotary.cu behind a torch::autograd::Function.
#include <c10/cuda/CUDAGuard.h>

#include "kernels/fused_ops.h"
#include "kernels/tensor_args.h"

namespace vramlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "FusedRotary";

// One launch per tensor: x [b, s, heads, d] -> out of the same shape, forward or backward.
torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                     bool backward) {
  const torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const int64_t tokens = in.size(0) * in.size(1);
  const auto launch = backward ? cuda::RotaryBackward : cuda::RotaryForward;
  CheckLaunch(
      launch(ElementTypeOf(in, kOp), in.data_ptr(), cos.data_ptr(), sin.data_ptr(), out.data_ptr(),
             tokens, in.size(1), in.size(2), in.size(3), StreamOf(in.device())),
      kOp);
  return out;
}

// Saved for backward: cos and sin (shared by every layer, so they cost nothing per layer).
class RotaryFunction : public torch::autograd::Function<RotaryFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& cos_in, const torch::Tensor& sin_in) {
    const c10::cuda::CUDAGuard guard(q.device());
    const torch::Tensor cos = cos_in.contiguous();
    const torch::Tensor sin = sin_in.contiguous();
    ctx->save_for_backward({cos, sin});
    return {Rotate(q, cos, sin, false), Rotate(k, cos, sin, false)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const c10::cuda::CUDAGuard guard(saved[0].device());
    // An output whose result was not used has an undefined gradient.
    torch::Tensor dq = grad_outputs[0].defined() ? Rotate(grad_outputs[0], saved[0], saved[1], true)
                                                 : torch::Tensor();
    torch::Tensor dk = grad_outputs[1].defined() ? Rotate(grad_outputs[1], saved[0], saved[1], true)
                                                 : torch::Tensor();
    return {dq, dk, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> FusedRotary(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& cos,
                                                    const torch::Tensor& sin) {
  TORCH_CHECK(q.defined() && q.is_cuda(), kOp, ": q must be a CUDA tensor");
  ElementTypeOf(q, kOp);
  CheckCudaTensor(k, kOp, "k", q.device(), q.scalar_type());
  CheckCudaTensor(cos, kOp, "cos", q.device(), q.scalar_type());
  CheckCudaTensor(sin, kOp, "sin", q.device(), q.scalar_type());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
                  q.size(3) == k.size(3) && q.size(3) % 2 == 0,
              kOp, ": expected q [b, s, heads, d] and k [b, s, kv_heads, d] with d even, got q ",
              q.sizes(), " and k ", k.sizes());
  TORCH_CHECK(cos.dim() == 2 && cos.size(0) == q.size(1) && cos.size(1) == q.size(3) &&
                  sin.sizes().equals(cos.sizes()),
              kOp, ": expected cos and sin [s, d] = [", q.size(1), ", ", q.size(3), "], got ",
              cos.sizes(), " and ", sin.sizes());
  variable_list out = RotaryFunction::apply(q, k, cos, sin);
  return {out[0], out[1]};
}

}  // namespace vramlab::kernels
