// The 8-bit rule's update of whole parameters on CUDA through the fused kernel of kernels/optim
// (one launch per parameter group, one pass over memory), where the worker was built with it.
// Everything that touches the kernel is here; without it HasFusedAdamW8bit is false and the rule
// runs its ATen ops.
#ifndef VRAMLAB_WORKER_OPTIM_ADAMW_8BIT_FUSED_H_
#define VRAMLAB_WORKER_OPTIM_ADAMW_8BIT_FUSED_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "worker/optim/adamw_math.h"
#include "worker/optim/blockwise_quantizer.h"

namespace vramlab::worker::optim_internal {

// One parameter and its 8-bit rule state, all contiguous on one CUDA device. Quantized: uint8
// codes `exp_avg`/`exp_avg_sq` and fp32 scales; otherwise fp32 moments and undefined scales.
struct FusedAdamW8bitTensor {
  torch::Tensor param, grad, exp_avg, exp_avg_sq, exp_avg_absmax, exp_avg_sq_absmax;
};

// Whether this build has the kernel and `device` is a CUDA device.
bool HasFusedAdamW8bit(const torch::Device& device);
// Whether the kernel takes parameters of `param_dtype` with gradients of `grad_dtype` (fp32, bf16,
// fp16 each).
bool FusedAdamW8bitSupports(torch::ScalarType param_dtype, torch::ScalarType grad_dtype);

// The step of every tensor at 1-based `step`, in one launch on the current stream; the maps live on
// the tensors' device. Requires HasFusedAdamW8bit and FusedAdamW8bitSupports.
void FusedAdamW8bit(const std::vector<FusedAdamW8bitTensor>& tensors,
                    const QuantizationMap& signed_map, const QuantizationMap& unsigned_map,
                    const AdamWHyper& hyper, int64_t step);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_ADAMW_8BIT_FUSED_H_
