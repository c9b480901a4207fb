// Rotary position embedding on q or k laid out [tokens, heads, head_dim], one thread per pair
// (i, i + head_dim / 2). The output is written to a new array; nothing is saved for backward but
// the cos/sin tables every layer shares.
#include "kernels/cuda/common.cuh"

namespace vramlab::kernels::cuda {
namespace {

// Forward, as the ATen path rounds: out = round(round(x * cos) + round(rotate_half(x) * sin)) with
// rotate_half(x) = (-x2, x1). Backward: dx = round(round(g * cos) + rotate_half^T(round(g * sin)))
// with rotate_half^T(v) = (v2, -v1).
template <typename T, bool kBackward>
__global__ void RotaryKernel(const T* __restrict__ in, const T* __restrict__ cos,
                             const T* __restrict__ sin, T* __restrict__ out, int64_t pairs,
                             int64_t seq_len, int64_t heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx % half;
    const int64_t token_head = idx / half;
    const int64_t position = (token_head / heads) % seq_len;
    const T* v = in + token_head * head_dim;
    T* o = out + token_head * head_dim;
    const T* c = cos + position * head_dim;
    const T* s = sin + position * head_dim;
    const float v1 = ToFloat(v[j]), v2 = ToFloat(v[j + half]);
    const float c1 = ToFloat(c[j]), c2 = ToFloat(c[j + half]);
    const float s1 = ToFloat(s[j]), s2 = ToFloat(s[j + half]);
    if (!kBackward) {
      o[j] = FromFloat<T>(Round<T>(v1 * c1) + Round<T>(-v2 * s1));
      o[j + half] = FromFloat<T>(Round<T>(v2 * c2) + Round<T>(v1 * s2));
    } else {
      o[j] = FromFloat<T>(Round<T>(v1 * c1) + Round<T>(v2 * s2));
      o[j + half] = FromFloat<T>(Round<T>(v2 * c2) - Round<T>(v1 * s1));
    }
  }
}

template <bool kBackward>
cudaError_t Launch(ElementType type, const void* in, const void* cos, const void* sin, void* out,
                   int64_t tokens, int64_t seq_len, int64_t heads, int64_t head_dim,
                   cudaStream_t stream) {
  const int64_t pairs = tokens * heads * (head_dim / 2);
  if (pairs == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    RotaryKernel<T, kBackward><<<GridFor(pairs, 256, 1 << 20), 256, 0, stream>>>(
        static_cast<const T*>(in), static_cast<const T*>(cos), static_cast<const T*>(sin),
        static_cast<T*>(out), pairs, seq_len, heads, head_dim);
  });
}

}  // namespace

cudaError_t RotaryForward(ElementType type, const void* x, const void* cos, const void* sin,
                          void* out, int64_t tokens, int64_t seq_len, int64_t heads,
                          int64_t head_dim, cudaStream_t stream) {
  return Launch<false>(type, x, cos, sin, out, tokens, seq_len, heads, head_dim, stream);
}

cudaError_t RotaryBackward(ElementType type, const void* dout, const void* cos, const void* sin,
                           void* dx, int64_t tokens, int64_t seq_len, int64_t heads,
                           int64_t head_dim, cudaStream_t stream) {
  return Launch<true>(type, dout, cos, sin, dx, tokens, seq_len, heads, head_dim, stream);
}

}  // namespace vramlab::kernels::cuda
