// FusedSwiGlu: kernels/cuda/swiglu.cu behind a torch::autograd::Function.
#include <c10/cuda/CUDAGuard.h>

#include "kernels/fused_ops.h"
#include "kernels/tensor_args.h"

namespace vramlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "FusedSwiGlu";

// Saved for backward: gate and up (input dtype); silu(gate) is recomputed.
class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_in,
                               const torch::Tensor& up_in) {
    const c10::cuda::CUDAGuard guard(gate_in.device());
    const torch::Tensor gate = gate_in.contiguous();
    const torch::Tensor up = up_in.contiguous();
    torch::Tensor out = torch::empty_like(gate);
    CheckLaunch(cuda::SwigluForward(ElementTypeOf(gate, kOp), gate.data_ptr(), up.data_ptr(),
                                    out.data_ptr(), gate.numel(), StreamOf(gate.device())),
                kOp);
    ctx->save_for_backward({gate, up});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& gate = saved[0];
    const torch::Tensor& up = saved[1];
    const c10::cuda::CUDAGuard guard(gate.device());
    const torch::Tensor dout = grad_outputs[0].contiguous();
    torch::Tensor dgate = torch::empty_like(gate);
    torch::Tensor dup = torch::empty_like(up);
    CheckLaunch(cuda::SwigluBackward(ElementTypeOf(gate, kOp), dout.data_ptr(), gate.data_ptr(),
                                     up.data_ptr(), dgate.data_ptr(), dup.data_ptr(), gate.numel(),
                                     StreamOf(gate.device())),
                kOp);
    return {dgate, dup};
  }
};

}  // namespace

torch::Tensor FusedSwiGlu(const torch::Tensor& gate, const torch::Tensor& up) {
  TORCH_CHECK(gate.defined() && gate.is_cuda(), kOp, ": gate must be a CUDA tensor");
  ElementTypeOf(gate, kOp);
  CheckCudaTensor(up, kOp, "up", gate.device(), gate.scalar_type());
  TORCH_CHECK(gate.sizes().equals(up.sizes()), kOp, ": gate ", gate.sizes(), " and up ", up.sizes(),
              " differ in shape");
  return SwiGluFunction::apply(gate, up);
}

}  // namespace vramlab::kernels
