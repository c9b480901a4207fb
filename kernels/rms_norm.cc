// FusedRmsNorm: kernels/cuda/rms_norm.cu behind a torch::autograd::Function.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/fused_ops.h"
#include "kernels/tensor_args.h"

namespace vramlab::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "FusedRmsNorm";

// Saved for backward: x (input dtype) and rstd [rows] (fp32).
class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, double eps) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const torch::Tensor x = x_in.contiguous();
    const torch::Tensor weight = weight_in.contiguous();
    const int64_t dim = x.size(-1);
    const int64_t rows = dim == 0 ? 0 : x.numel() / dim;
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor rstd = torch::empty({rows}, x.options().dtype(torch::kFloat32));
    CheckLaunch(cuda::RmsNormForward(ElementTypeOf(x, kOp), x.data_ptr(), weight.data_ptr(),
                                     y.data_ptr(), rstd.data_ptr<float>(), rows, dim,
                                     static_cast<float>(eps), StreamOf(x.device())),
                kOp);
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& rstd = saved[2];
    const c10::cuda::CUDAGuard guard(x.device());
    const torch::Tensor dy = grad_outputs[0].contiguous();
    const int64_t dim = x.size(-1);
    const int64_t rows = rstd.numel();
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dweight = torch::empty_like(weight);
    const int64_t partial_rows = cuda::RmsNormBackwardPartialRows(
        rows, at::cuda::getDeviceProperties(x.device().index())->multiProcessorCount);
    torch::Tensor partial = torch::empty({partial_rows, dim}, x.options().dtype(torch::kFloat32));
    CheckLaunch(cuda::RmsNormBackward(ElementTypeOf(x, kOp), dy.data_ptr(), x.data_ptr(),
                                      weight.data_ptr(), rstd.data_ptr<float>(), dx.data_ptr(),
                                      dweight.data_ptr(), partial.data_ptr<float>(), partial_rows,
                                      rows, dim, StreamOf(x.device())),
                kOp);
    return {dx, dweight, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.defined() && x.is_cuda(), kOp, ": x must be a CUDA tensor");
  ElementTypeOf(x, kOp);
  CheckCudaTensor(weight, kOp, "weight", x.device(), x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1), kOp,
              ": expected x [..., dim] and weight [dim], got x ", x.sizes(), " and weight ",
              weight.sizes());
  return RmsNormFunction::apply(x, weight, eps);
}

}  // namespace vramlab::kernels
