// The scalars of one AdamW step as ATen hands them to a float kernel (double arguments rounded to
// float): what the one-pass loops (host_adamw_loops.cc, the fused 8-bit kernel) compute with.
// FloatScalarsAt (adamw_math.h) fills them for a step. No LibTorch here.
#ifndef VRAMLAB_WORKER_OPTIM_ADAMW_FLOAT_SCALARS_H_
#define VRAMLAB_WORKER_OPTIM_ADAMW_FLOAT_SCALARS_H_

namespace vramlab::worker::optim_internal {

struct AdamWFloatScalars {
  float decay, lerp_weight, beta2, one_minus_beta2, sqrt_bias_correction2, eps, neg_step_size;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_ADAMW_FLOAT_SCALARS_H_
