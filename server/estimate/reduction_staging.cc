#include "server/estimate/reduction_staging.h"

#include <algorithm>

namespace vramlab::server::estimate {
namespace {

constexpr int kMaxThreads = 512;  // Reduce.cuh MAX_NUM_THREADS for every real dtype
constexpr int kWarp = 32;
constexpr int64_t kMinValuesPerThread = 16;
constexpr int64_t kMaxValuesPerThread = 256;
constexpr int64_t kAccumulatorBytes = 4;  // fp32

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest power of two not above n (at least 1).
int64_t LastPow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

int64_t ReductionStagingBytes(int64_t inputs, int64_t outputs) {
  if (inputs <= 0 || outputs <= 0) return 0;
  // The output dimension is the fastest moving one: outputs are vectorised (4, 2 or 1 that
  // divides their count) and laid along the block's x.
  int64_t vec = 4;
  while (outputs % vec != 0) vec /= 2;
  const int64_t dim0 = outputs / vec, dim1 = inputs;
  const int64_t max_threads = kMaxThreads / vec;
  const int64_t dim0_pow2 = dim0 < max_threads ? LastPow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? LastPow2(dim1) : max_threads;
  int64_t block_width = std::min<int64_t>(dim0_pow2, kWarp);
  const int64_t block_height = std::min(dim1_pow2, max_threads / block_width);
  block_width = std::min(dim0_pow2, max_threads / block_height);
  const int64_t num_threads = block_width * block_height;

  const int64_t step_output = block_width;
  int64_t step_input = 1;
  if (inputs < block_height * 16 && inputs < kMaxValuesPerThread) return 0;  // warps per output
  step_input *= block_height;
  const int64_t values_per_thread = DivUp(inputs, step_input);
  const int64_t blocks_per_sm = kCudaMaxThreadsPerMultiprocessor / num_threads;
  const int64_t target_grid = kCudaMultiprocessors * blocks_per_sm;
  const int64_t grid = DivUp(outputs / vec, step_output);
  if (values_per_thread < kMaxValuesPerThread || grid > target_grid) return 0;
  const int64_t ctas =
      std::max(std::min(DivUp(target_grid, grid), DivUp(values_per_thread, kMinValuesPerThread)),
               DivUp(values_per_thread, kMaxValuesPerThread));
  if (ctas <= 1) return 0;
  return kAccumulatorBytes * outputs * ctas * block_width * vec;
}

}  // namespace vramlab::server::estimate
