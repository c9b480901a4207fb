// Cross-entropy of one chunk of logits, one block per row: an online max/sum-of-exponentials pass
// in fp32, then (for training) a second pass that overwrites the logits with their gradient, so
// that a chunk never needs a second [rows, vocab] buffer.
#include <cassert>

#include "kernels/cuda/common.cuh"

namespace vramlab::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// (max, sum of exp(v - max)) pairs combined: the running state of a streaming logsumexp.
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ MaxSum WarpCombine(MaxSum v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                 __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = Combine(v, other);
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    CrossEntropyKernel(T* __restrict__ logits, const int64_t* __restrict__ targets,
                       int64_t ignore_index, const float* __restrict__ count,
                       float* __restrict__ row_loss, int64_t vocab, bool write_grad) {
  __shared__ float shared_max[32];
  __shared__ float shared_sum[32];
  const int64_t row = blockIdx.x;
  T* x = logits + row * vocab;
  const int64_t target = targets[row];
  const bool counted = target != ignore_index;
  assert(!counted || (target >= 0 && target < vocab));
  // Read before any thread of the block overwrites the row.
  const float target_logit = counted && threadIdx.x == 0 ? ToFloat(x[target]) : 0.0f;

  MaxSum state{-INFINITY, 0.0f};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = ToFloat(x[i]);
    if (v > state.max) {
      state.sum = state.sum * expf(state.max - v) + 1.0f;
      state.max = v;
    } else {
      state.sum += expf(v - state.max);
    }
  }
  state = WarpCombine(state);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    shared_max[warp] = state.max;
    shared_sum[warp] = state.sum;
  }
  __syncthreads();
  const bool has = lane < static_cast<int>(blockDim.x >> 5);
  state = WarpCombine(MaxSum{has ? shared_max[lane] : -INFINITY, has ? shared_sum[lane] : 0.0f});
  const float lse = state.max + logf(state.sum);
  if (threadIdx.x == 0) row_loss[row] = counted ? lse - target_logit : 0.0f;
  if (!write_grad) return;
  const float scale = counted ? 1.0f / *count : 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = expf(ToFloat(x[i]) - lse);
    x[i] = FromFloat<T>(((i == target ? p - 1.0f : p)) * scale);
  }
}

}  // namespace

cudaError_t CrossEntropyChunk(ElementType type, void* logits, const int64_t* targets,
                              int64_t ignore_index, const float* count, float* row_loss,
                              int64_t rows, int64_t vocab, bool write_grad, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CrossEntropyKernel<T><<<static_cast<unsigned int>(rows), kThreads, 0, stream>>>(
        static_cast<T*>(logits), targets, ignore_index, count, row_loss, vocab, write_grad);
  });
}

}  // namespace vramlab::kernels::cuda
