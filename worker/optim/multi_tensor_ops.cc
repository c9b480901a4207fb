#include "worker/optim/multi_tensor_ops.h"

#include <torch/version.h>

#include <stdexcept>

// _fused_adamw_ exists from LibTorch 2.0 (CUDA); _foreach_copy_ from 2.2.
#if TORCH_VERSION_MAJOR >= 2
#define VRAMLAB_HAS_FUSED_ADAMW 1
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#define VRAMLAB_HAS_FOREACH_COPY 1
#endif

namespace vramlab::worker::optim_internal {

bool HasFusedAdamW(const torch::Device& device) {
#if defined(VRAMLAB_HAS_FUSED_ADAMW) && defined(VRAMLAB_WITH_CUDA)
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

void FusedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                const std::vector<torch::Tensor>& exp_avgs,
                const std::vector<torch::Tensor>& exp_avg_sqs, int64_t step,
                const AdamWHyper& hyper) {
  if (params.empty()) return;
#if defined(VRAMLAB_HAS_FUSED_ADAMW) && defined(VRAMLAB_WITH_CUDA)
  // The kernel only reads the step (torch.optim increments it beforehand), so one device scalar
  // can stand for every tensor; no per-parameter step tensors are kept as state.
  torch::Tensor step_scalar =
      torch::full({}, static_cast<double>(step),
                  torch::TensorOptions().dtype(torch::kFloat).device(params[0].device()));
  std::vector<torch::Tensor> steps(params.size(), step_scalar);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, hyper.lr,
                    hyper.beta1, hyper.beta2, hyper.weight_decay, hyper.eps, /*amsgrad=*/false,
                    /*maximize=*/false);
#else
  (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)step, (void)hyper;
  throw std::logic_error("FusedAdamW called without a fused AdamW kernel in this LibTorch");
#endif
}

void ForeachCopy(const std::vector<torch::Tensor>& dst, const std::vector<torch::Tensor>& src) {
  if (dst.empty()) return;
#if defined(VRAMLAB_HAS_FOREACH_COPY)
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) {
    torch::Tensor d = dst[i];
    d.copy_(src[i]);
  }
#endif
}

}  // namespace vramlab::worker::optim_internal
