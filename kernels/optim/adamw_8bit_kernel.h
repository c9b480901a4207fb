// The fused 8-bit AdamW step on CUDA: for every tensor of a parameter group, in one kernel launch
// and one pass over memory, dequantize the block-wise 8-bit moments (bitsandbytes' dynamic maps),
// apply the AdamW update in fp32, requantize each block of kAdamW8bitBlock elements with its new
// absmax, and write the parameter. Tensors whose moments are plain fp32 (below the 8-bit size
// threshold) are updated in the same launch.
//
// The arithmetic is worker/optim's 8-bit rule (adamw_8bit_rule.cc) op for op: the same fp32
// scalars, ATen's formulas for lerp, addcmul and addcdiv, the block absmax of the updated moment,
// and the nearest map entry found as the number of midpoints below value / absmax (what
// torch::searchsorted returns). Results differ from the ATen ops only where the compiler orders or
// contracts a multiply-add differently.
//
// This header needs neither LibTorch nor the CUDA headers; worker/optim/adamw_8bit_fused.cc
// fills in the table from tensors.
#ifndef VRAMLAB_KERNELS_OPTIM_ADAMW_8BIT_KERNEL_H_
#define VRAMLAB_KERNELS_OPTIM_ADAMW_8BIT_KERNEL_H_

#include <cstdint>

namespace vramlab::kernels {

// Elements per quantization block; one thread per element, one CUDA block per quantization block
// at a time.
constexpr int kAdamW8bitBlock = 256;
// Entries of a dynamic map (values); midpoints has one fewer.
constexpr int kDynamicMapSize = 256;

enum class FloatKind : int32_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// One tensor of the launch, all pointers on the launch's device, every array contiguous.
struct AdamW8bitTensor {
  void* param = nullptr;       // `numel` elements of param_kind, updated in place
  const void* grad = nullptr;  // `numel` elements of grad_kind
  // Quantized (exp_avg_absmax != nullptr): uint8 codes of the signed (exp_avg) and unsigned
  // (exp_avg_sq) maps, one fp32 absmax per block of kAdamW8bitBlock. Otherwise fp32 moments.
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  float* exp_avg_absmax = nullptr;
  float* exp_avg_sq_absmax = nullptr;
  int64_t numel = 0;
  // Index of this tensor's first block among all blocks of the launch (the prefix sum of
  // ceil(numel / kAdamW8bitBlock) over the tensors before it).
  int64_t first_block = 0;
  FloatKind param_kind = FloatKind::kFloat32;
  FloatKind grad_kind = FloatKind::kFloat32;
};

// The AdamW scalars of one step as ATen hands them to a float kernel (double arguments rounded to
// float): p *= decay; m = lerp(m, g, lerp_weight); v = v * beta2 + one_minus_beta2 * g * g;
// p += neg_step_size * (m / (sqrt(v) * inv_sqrt_bias_correction2 + eps)). ATen's CUDA division
// by a scalar multiplies by its reciprocal rounded to float, float(1 / sqrt(1 - beta2^t)).
struct AdamWScalars {
  float decay, lerp_weight, beta2, one_minus_beta2, inv_sqrt_bias_correction2, eps, neg_step_size;
};

struct DynamicMaps {
  const float* signed_values;     // kDynamicMapSize, ascending
  const float* signed_midpoints;  // kDynamicMapSize - 1
  const float* unsigned_values;
  const float* unsigned_midpoints;
};

// Enqueues the step of `num_tensors` tensors described by `tensors` (a device array, sorted by
// first_block, with `total_blocks` blocks in all) on `stream` (a cudaStream_t) of the current
// device. Throws std::runtime_error if the launch fails.
void LaunchAdamW8bit(const AdamW8bitTensor* tensors, int32_t num_tensors, int64_t total_blocks,
                     const DynamicMaps& maps, const AdamWScalars& scalars, void* stream);

}  // namespace vramlab::kernels

#endif  // VRAMLAB_KERNELS_OPTIM_ADAMW_8BIT_KERNEL_H_
