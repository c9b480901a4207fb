// AdamW over host memory in one pass per element, for the state of a GPU run offloaded to pinned
// host memory. AdamWUpdate (adamw_math.h) is the same update as ~10 ATen ops, each a full pass
// over the range with its own rounding and a temporary; on the host, those passes made the
// offloaded step of qwen2.5-1.5b take 13.7 s on an H200 host. In fp32 this loop rounds as those
// ops do (the two agree within 2e-7 relative: ATen's vector kernels use fused multiply-adds). In
// bf16 it computes what the GPU's fused AdamW kernel computes for bf16 state — every value upcast,
// the update in fp32, one rounding per stored tensor — so an offloaded run updates as the same run
// with its state on the GPU does, not as the bf16 ATen ops, which round after every op. The
// fp32-master form reads the bf16 gradient and writes the bf16 parameter in the same pass.
//
// Threads are persistent std::threads (host_thread_pool.h), not at::parallel_for: OpenMP regions
// of LibTorch hung in libgomp on the GPU host once the host step ran inside them
// (worker/optim/host_stepper.cc).
#ifndef VRAMLAB_WORKER_OPTIM_HOST_ADAMW_H_
#define VRAMLAB_WORKER_OPTIM_HOST_ADAMW_H_

#include <torch/torch.h>

#include <cstdint>

#include "worker/optim/adamw_math.h"

namespace vramlab::worker::optim_internal {

// True when the four tensors are contiguous CPU tensors of one dtype, float or bfloat16, with the
// same number of elements.
bool HostAdamWSupported(const torch::Tensor& param, const torch::Tensor& grad,
                        const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);

// The update of AdamWUpdate, in place, at 1-based `step`, in fp32 (bf16 values upcast, results
// rounded once); requires HostAdamWSupported.
void HostAdamW(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
               const torch::Tensor& grad, const torch::Tensor& exp_avg,
               const torch::Tensor& exp_avg_sq);

// HostAdamW where the state is pinned host memory (offloaded for a GPU run, where the host's speed
// is the step's speed) and the layout allows it; AdamWUpdate otherwise, so CPU-device runs keep
// the ATen ops whose temporaries the anatomy tests and the estimator count.
void AdamWUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
                         const torch::Tensor& grad, const torch::Tensor& exp_avg,
                         const torch::Tensor& exp_avg_sq);

// The fp32-master form: `master`, `exp_avg` and `exp_avg_sq` fp32, `grad` and `param` of the
// parameter's dtype (float or bf16) with as many elements. True when all are contiguous CPU
// tensors.
bool HostAdamWMasterSupported(const torch::Tensor& master, const torch::Tensor& grad,
                              const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                              const torch::Tensor& param);

// AdamWUpdate of `master` with the upcast gradient, then `param` = master rounded to its dtype,
// in one pass (bit-identical to HostAdamW on the upcast gradient followed by param.copy_(master));
// requires HostAdamWMasterSupported.
void HostAdamWMaster(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                     const torch::Tensor& grad, const torch::Tensor& exp_avg,
                     const torch::Tensor& exp_avg_sq, const torch::Tensor& param);

// HostAdamWMaster for pinned state, as AdamWUpdateForState decides; otherwise the ATen ops on an
// fp32 copy of the gradient, then param.copy_(master).
void AdamWMasterUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                               const torch::Tensor& grad, const torch::Tensor& exp_avg,
                               const torch::Tensor& exp_avg_sq, const torch::Tensor& param);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_HOST_ADAMW_H_
