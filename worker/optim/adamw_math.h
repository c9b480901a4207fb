// The AdamW update of one tensor, exactly as torch.optim.AdamW's single-tensor (non-foreach,
// non-fused) implementation orders it, shared by every AdamW flavour in worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_ADAMW_MATH_H_
#define VRAMLAB_WORKER_OPTIM_ADAMW_MATH_H_

#include <torch/torch.h>

#include <cstdint>

#include "worker/optim/adamw_float_scalars.h"

namespace vramlab::worker::optim_internal {

struct AdamWHyper {
  double lr = 1e-5, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// The scalars of AdamWUpdate at 1-based `step` (adamw_float_scalars.h).
AdamWFloatScalars FloatScalarsAt(const AdamWHyper& hyper, int64_t step);

// At 1-based step `step`, in place, all tensors of one dtype and device:
//   param *= 1 - lr * wd
//   exp_avg = lerp(exp_avg, grad, 1 - beta1)
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
//   param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
// Allocates one temporary the size of `param` (the denominator).
void AdamWUpdate(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
                 const torch::Tensor& grad, const torch::Tensor& exp_avg,
                 const torch::Tensor& exp_avg_sq);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_ADAMW_MATH_H_
