// RMSNorm forward and backward (HF Qwen2RMSNorm: normalize in fp32, round to the element type,
// scale by the weight). One block per row in the forward; the backward's blocks stride over rows
// and keep fp32 partial sums of the weight gradient, one row of partials per block, summed by a
// second kernel (no atomics, so the result does not depend on scheduling).
#include "kernels/cuda/common.cuh"

namespace vramlab::kernels::cuda {
namespace {

template <typename T>
__global__ void RmsNormForwardKernel(const T* __restrict__ x, const T* __restrict__ weight,
                                     T* __restrict__ y, float* __restrict__ rstd, int64_t dim,
                                     float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  T* yr = y + row * dim;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = ToFloat(xr[i]);
    sum_sq += v * v;
  }
  sum_sq = BlockSum(sum_sq, shared);
  const float r = rsqrtf(sum_sq / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float normed = Round<T>(ToFloat(xr[i]) * r);
    yr[i] = FromFloat<T>(ToFloat(weight[i]) * normed);
  }
  if (threadIdx.x == 0) rstd[row] = r;
}

// dx = r * dn - x * r^3 * sum(dn * x) / dim with dn = round(dy * weight) (the ATen path's rounded
// product); the weight's gradient sums dy * round(x * r) over rows.
template <typename T>
__global__ void RmsNormBackwardKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                      const T* __restrict__ weight, const float* __restrict__ rstd,
                                      T* __restrict__ dx, float* __restrict__ dweight_partial,
                                      int64_t rows, int64_t dim) {
  __shared__ float shared[32];
  float* partial = dweight_partial + static_cast<int64_t>(blockIdx.x) * dim;
  // Each thread owns columns threadIdx.x + k * blockDim.x of this block's partial row.
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) partial[i] = 0.0f;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* dyr = dy + row * dim;
    const T* xr = x + row * dim;
    const float r = rstd[row];
    float dot = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      dot += Round<T>(ToFloat(dyr[i]) * ToFloat(weight[i])) * ToFloat(xr[i]);
    }
    dot = BlockSum(dot, shared);
    const float coef = dot * r * r * r / static_cast<float>(dim);
    T* dxr = dx + row * dim;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float g = ToFloat(dyr[i]);
      const float xi = ToFloat(xr[i]);
      const float dn = Round<T>(g * ToFloat(weight[i]));
      dxr[i] = FromFloat<T>(r * dn - xi * coef);
      partial[i] += g * Round<T>(xi * r);
    }
  }
}

template <typename T>
__global__ void ColumnSumKernel(const float* __restrict__ partial, int64_t partial_rows,
                                int64_t dim, T* __restrict__ out) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < dim;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = 0; p < partial_rows; ++p) sum += partial[p * dim + col];
    out[col] = FromFloat<T>(sum);
  }
}

}  // namespace

cudaError_t RmsNormForward(ElementType type, const void* x, const void* weight, void* y,
                           float* rstd, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int threads = RowThreads(dim);
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    RmsNormForwardKernel<T><<<static_cast<unsigned int>(rows), threads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<T*>(y), rstd, dim,
        eps);
  });
}

int64_t RmsNormBackwardPartialRows(int64_t rows, int multiprocessors) {
  const int64_t blocks = 4 * static_cast<int64_t>(multiprocessors > 0 ? multiprocessors : 1);
  return rows < blocks ? (rows > 0 ? rows : 1) : blocks;
}

cudaError_t RmsNormBackward(ElementType type, const void* dy, const void* x, const void* weight,
                            const float* rstd, void* dx, void* dweight, float* dweight_partial,
                            int64_t partial_rows, int64_t rows, int64_t dim, cudaStream_t stream) {
  const int threads = RowThreads(dim);
  return Dispatch(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    RmsNormBackwardKernel<T><<<static_cast<unsigned int>(partial_rows), threads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(weight), rstd,
        static_cast<T*>(dx), dweight_partial, rows, dim);
    ColumnSumKernel<T><<<GridFor(dim, 256), 256, 0, stream>>>(dweight_partial, partial_rows, dim,
                                                              static_cast<T*>(dweight));
  });
}

}  // namespace vramlab::kernels::cuda
