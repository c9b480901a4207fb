// Device helpers shared by the kernels of this folder: element conversion, rounding as the ATen
// path rounds, fp32 warp and block reductions, and the element-type dispatch.
#ifndef VRAMLAB_KERNELS_CUDA_COMMON_CUH_
#define VRAMLAB_KERNELS_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace vramlab::kernels::cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// v rounded to T and read back: what an ATen op computing in fp32 and storing T produces.
template <typename T>
__device__ __forceinline__ float Round(float v) {
  return ToFloat<T>(FromFloat<T>(v));
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The sum of v over the block, returned to every thread. blockDim.x is a multiple of 32 (at most
// 1024); `shared` holds 32 floats. Safe to call repeatedly with the same `shared`.
__device__ __forceinline__ float BlockSum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // a previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : 0.0f;
  return WarpSum(v);
}

__device__ __forceinline__ float BlockMax(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : -INFINITY;
  return WarpMax(v);
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T the device type of `type`.
template <typename F>
cudaError_t Dispatch(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kFloat32:
      f(TypeTag<float>{});
      break;
    case ElementType::kFloat16:
      f(TypeTag<__half>{});
      break;
    case ElementType::kBFloat16:
      f(TypeTag<__nv_bfloat16>{});
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// A grid of at most `max_blocks` blocks of `threads` covering n elements (grid-stride loops).
inline unsigned int GridFor(int64_t n, int threads, int64_t max_blocks = 65535) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned int>(blocks < 1 ? 1 : blocks);
}

// Threads for a block that reduces one row of `dim` elements: a multiple of 32, at most 1024,
// about four elements per thread.
inline int RowThreads(int64_t dim) {
  int64_t threads = ((dim / 4 + 31) / 32) * 32;
  if (threads < 32) threads = 32;
  if (threads > 1024) threads = 1024;
  return static_cast<int>(threads);
}

}  // namespace vramlab::kernels::cuda

#endif  // VRAMLAB_KERNELS_CUDA_COMMON_CUH_
