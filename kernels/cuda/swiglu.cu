// SwiGLU, silu(gate) * up, elementwise. The backward recomputes silu from gate, so only gate and
// up are saved (the ATen path also keeps silu(gate)).
#include "kernels/cuda/common.cuh"

namespace vramlab::kernels::cuda {
namespace {

// expf, not __expf: the ATen path's accuracy.
__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
__device__ __forceinline__ float Silu(float v) { return v / (1.0f + expf(-v)); }

// out = round(round(silu(g)) * u), the ATen path's two rounded ops.
template <typename T>
__global__ void SwigluForwardKernel(const T* __restrict__ gate, const T* __restrict__ up,
                                    T* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = ToFloat(gate[i]);
    const float silu = Round<T>(Silu(g));
    out[i] = FromFloat<T>(silu * ToFloat(up[i]));
  }
}

// As the ATen path's mul and silu backward: d_silu = round(dy * u), du = round(dy *
// round(silu(g))), dg = round(d_silu * s * (1 + g * (1 - s))) with s = sigmoid(g).
template <typename T>
__global__ void SwigluBackwardKernel(const T* __restrict__ dout, const T* __restrict__ gate,
                                     const T* __restrict__ up, T* __restrict__ dgate,
                                     T* __restrict__ dup, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float dy = ToFloat(dout[i]);
    const float g = ToFloat(gate[i]);
    const float s = Sigmoid(g);
    const float d_silu = Round<T>(dy * ToFloat(up[i]));
    dup[i] = FromFloat<T>(dy * Round<T>(Silu(g)));
    dgate[i] = FromFloat<T>(d_silu * s * (1.0f + g * (1.0f - s)));
  }
}

}  // namespace

cudaError_t SwigluForward(ElementType type, const void* gate, const void* up, void* out, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SwigluForwardKernel<T><<<GridFor(n, 256, 1 << 20), 256, 0, stream>>>(
        static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), n);
  });
}

cudaError_t SwigluBackward(ElementType type, const void* dout, const void* gate, const void* up,
                           void* dgate, void* dup, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SwigluBackwardKernel<T><<<GridFor(n, 256, 1 << 20), 256, 0, stream>>>(
        static_cast<const T*>(dout), static_cast<const T*>(gate), static_cast<const T*>(up),
        static_cast<T*>(dgate), static_cast<T*>(dup), n);
  });
}

}  // namespace vramlab::kernels::cuda
