// Multi-tensor kernels (one launch for many tensors) where this LibTorch has them: torch's fused
// AdamW on CUDA with LibTorch 2.x and _foreach_copy_ (2.2+). Everything version- or CUDA-specific
// in worker/optim lives in multi_tensor_ops.cc.
#ifndef VRAMLAB_WORKER_OPTIM_MULTI_TENSOR_OPS_H_
#define VRAMLAB_WORKER_OPTIM_MULTI_TENSOR_OPS_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "worker/optim/adamw_math.h"

namespace vramlab::worker::optim_internal {

// Whether FusedAdamW can run on tensors of `device`.
bool HasFusedAdamW(const torch::Device& device);

// at::_fused_adamw_ over whole tensors at 1-based step `step`; every list has the same length and
// all tensors share one dtype and device. Requires HasFusedAdamW(device).
void FusedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                const std::vector<torch::Tensor>& exp_avgs,
                const std::vector<torch::Tensor>& exp_avg_sqs, int64_t step,
                const AdamWHyper& hyper);

// dst[i].copy_(src[i]) for every i (dtype conversion allowed): one multi-tensor launch where
// LibTorch has _foreach_copy_, else a loop.
void ForeachCopy(const std::vector<torch::Tensor>& dst, const std::vector<torch::Tensor>& src);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_MULTI_TENSOR_OPS_H_
