#include "kernels/optim/adamw_8bit_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vramlab::kernels {
namespace {

constexpr int kWarps = kAdamW8bitBlock / 32;

__device__ __forceinline__ float Load(const void* data, FloatKind kind, int64_t i) {
  switch (kind) {
    case FloatKind::kBFloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    case FloatKind::kFloat16:
      return __half2float(static_cast<const __half*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Round to nearest even, as ATen's copy_ from fp32 does.
__device__ __forceinline__ void Store(void* data, FloatKind kind, int64_t i, float x) {
  switch (kind) {
    case FloatKind::kBFloat16:
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(x);
      break;
    case FloatKind::kFloat16:
      static_cast<__half*>(data)[i] = __float2half_rn(x);
      break;
    default:
      static_cast<float*>(data)[i] = x;
      break;
  }
}

// AdamWUpdate (worker/optim/adamw_math.cc) on one fp32 element, each op as ATen's CUDA kernel
// writes it. Where ATen runs two kernels, the result of the first is rounded (__fmul_rn,
// __fadd_rn: never merged into a multiply-add); inside one ATen kernel (lerp, addcmul, addcdiv)
// the expression is ATen's, for nvcc to contract as it contracts ATen's.
__device__ __forceinline__ void AdamWStep(const AdamWScalars& s, float grad, float& param,
                                          float& avg, float& sq) {
  param = __fmul_rn(param, s.decay);  // p.mul_(1 - lr * wd)
  const float diff = grad - avg;      // m.lerp_(g, 1 - beta1)
  avg = fabsf(s.lerp_weight) < 0.5f ? avg + s.lerp_weight * diff
                                    : grad - diff * (1.0f - s.lerp_weight);
  sq = __fmul_rn(sq, s.beta2);                            // v.mul_(beta2)
  sq = sq + s.one_minus_beta2 * grad * grad;              // .addcmul_(g, g, 1 - beta2)
  float denom = sqrtf(sq);                                // v.sqrt()
  denom = __fmul_rn(denom, s.inv_sqrt_bias_correction2);  // .div_(sqrt(bc2))
  denom = __fadd_rn(denom, s.eps);                        // .add_(eps)
  param = param + s.neg_step_size * (avg / denom);        // p.addcdiv_(m, denom, -step)
}

// The number of the 255 ascending `midpoints` below x: torch::searchsorted(midpoints, x), the
// index of the nearest map value.
__device__ __forceinline__ uint8_t Encode(float x, const float* midpoints) {
  int lo = 0, hi = kDynamicMapSize - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (midpoints[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<uint8_t>(lo);
}

// The largest t with tensors[t].first_block <= block.
__device__ __forceinline__ int FindTensor(const AdamW8bitTensor* tensors, int num_tensors,
                                          int64_t block) {
  int lo = 0, hi = num_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tensors[mid].first_block <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Both maxima over the CUDA block; every thread gets them. Ends with a barrier, so `scratch` can
// be reused at once.
__device__ __forceinline__ void BlockMax2(float& a, float& b, float (*scratch)[kWarps]) {
  for (int offset = 16; offset > 0; offset /= 2) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, offset));
    b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, offset));
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    scratch[0][warp] = a;
    scratch[1][warp] = b;
  }
  __syncthreads();
  a = scratch[0][0];
  b = scratch[1][0];
  for (int w = 1; w < kWarps; ++w) {
    a = fmaxf(a, scratch[0][w]);
    b = fmaxf(b, scratch[1][w]);
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kAdamW8bitBlock)
    AdamW8bitKernel(const AdamW8bitTensor* tensors, int num_tensors, int64_t total_blocks,
                    DynamicMaps maps, AdamWScalars scalars) {
  __shared__ float signed_values[kDynamicMapSize], unsigned_values[kDynamicMapSize];
  __shared__ float signed_midpoints[kDynamicMapSize - 1], unsigned_midpoints[kDynamicMapSize - 1];
  __shared__ float scratch[2][kWarps];
  const int tid = threadIdx.x;
  signed_values[tid] = maps.signed_values[tid];
  unsigned_values[tid] = maps.unsigned_values[tid];
  if (tid < kDynamicMapSize - 1) {
    signed_midpoints[tid] = maps.signed_midpoints[tid];
    unsigned_midpoints[tid] = maps.unsigned_midpoints[tid];
  }
  __syncthreads();

  // The loop bounds are the same for every thread of the CUDA block, so the barriers inside are
  // reached by all. Blocks only grow, so the tensor is found by a binary search once and then by
  // stepping forward.
  int tensor = FindTensor(tensors, num_tensors, blockIdx.x);
  for (int64_t block = blockIdx.x; block < total_blocks; block += gridDim.x) {
    while (tensor + 1 < num_tensors && tensors[tensor + 1].first_block <= block) ++tensor;
    const AdamW8bitTensor& t = tensors[tensor];
    const int64_t local_block = block - t.first_block;
    const int64_t i = local_block * kAdamW8bitBlock + tid;
    const bool active = i < t.numel;
    const bool quantized = t.exp_avg_absmax != nullptr;
    float param = 0, avg = 0, sq = 0;
    if (active) {
      param = Load(t.param, t.param_kind, i);
      const float grad = Load(t.grad, t.grad_kind, i);
      if (quantized) {
        // Read before BlockMax2's barrier; thread 0 overwrites the scales after it.
        avg = signed_values[static_cast<const uint8_t*>(t.exp_avg)[i]] *
              t.exp_avg_absmax[local_block];
        sq = unsigned_values[static_cast<const uint8_t*>(t.exp_avg_sq)[i]] *
             t.exp_avg_sq_absmax[local_block];
      } else {
        avg = static_cast<const float*>(t.exp_avg)[i];
        sq = static_cast<const float*>(t.exp_avg_sq)[i];
      }
      AdamWStep(scalars, grad, param, avg, sq);
      Store(t.param, t.param_kind, i, param);
      if (!quantized) {
        static_cast<float*>(t.exp_avg)[i] = avg;
        static_cast<float*>(t.exp_avg_sq)[i] = sq;
      }
    }
    if (!quantized) continue;  // the same for the whole CUDA block
    float avg_absmax = active ? fabsf(avg) : 0.0f, sq_absmax = active ? fabsf(sq) : 0.0f;
    BlockMax2(avg_absmax, sq_absmax, scratch);
    if (tid == 0) {
      t.exp_avg_absmax[local_block] = avg_absmax;
      t.exp_avg_sq_absmax[local_block] = sq_absmax;
    }
    if (active) {
      // An all-zero block encodes to the code of 0 with any scale; 1 avoids 0/0.
      const float avg_scale = avg_absmax == 0.0f ? 1.0f : avg_absmax;
      const float sq_scale = sq_absmax == 0.0f ? 1.0f : sq_absmax;
      static_cast<uint8_t*>(t.exp_avg)[i] = Encode(avg / avg_scale, signed_midpoints);
      static_cast<uint8_t*>(t.exp_avg_sq)[i] = Encode(sq / sq_scale, unsigned_midpoints);
    }
  }
}

void ThrowIfFailed(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("fused 8-bit AdamW: ") + what + ": " +
                             cudaGetErrorString(error));
  }
}

}  // namespace

void LaunchAdamW8bit(const AdamW8bitTensor* tensors, int32_t num_tensors, int64_t total_blocks,
                     const DynamicMaps& maps, const AdamWScalars& scalars, void* stream) {
  if (num_tensors <= 0 || total_blocks <= 0) return;
  // One wave of resident CUDA blocks, each striding over the quantization blocks: the maps are
  // loaded into shared memory once per CUDA block, and no block waits for a second wave.
  int device = 0, sms = 0, per_sm = 0;
  ThrowIfFailed(cudaGetDevice(&device), "cudaGetDevice");
  ThrowIfFailed(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                "cudaDeviceGetAttribute");
  ThrowIfFailed(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, AdamW8bitKernel, kAdamW8bitBlock, 0),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int64_t grid = std::min<int64_t>(total_blocks, int64_t{sms} * std::max(1, per_sm));
  AdamW8bitKernel<<<static_cast<unsigned>(grid), kAdamW8bitBlock, 0,
                    static_cast<cudaStream_t>(stream)>>>(tensors, num_tensors, total_blocks, maps,
                                                         scalars);
  ThrowIfFailed(cudaGetLastError(), "kernel launch");
}

}  // namespace vramlab::kernels
