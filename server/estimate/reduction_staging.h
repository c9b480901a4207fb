// The staging buffer a CUDA reduction over the token dimension borrows from the caching
// allocator: a parameter's gradient that sums a [tokens, n] product over its tokens (an RMSNorm
// weight's, a projection bias's) splits each output's tokens across thread blocks once there are
// enough of them, and the blocks meet in an fp32 buffer that lives only for the kernel.
#ifndef VRAMLAB_SERVER_ESTIMATE_REDUCTION_STAGING_H_
#define VRAMLAB_SERVER_ESTIMATE_REDUCTION_STAGING_H_

#include <cstdint>

namespace vramlab::server::estimate {

// The devices the lab runs on (H100 SXM, H200): 132 multiprocessors of 2,048 threads each.
constexpr int kCudaMultiprocessors = 132;
constexpr int kCudaMaxThreadsPerMultiprocessor = 2048;

// Bytes of the staging buffer (0 when the reduction needs none) that summing a contiguous
// [inputs, outputs] tensor of a 2-byte or 4-byte dtype over its first dimension requests, with
// fp32 accumulation, as ATen's setReduceConfig lays the kernel out (ATen/native/cuda/Reduce.cuh):
// outputs vectorised by up to 4 along the warp, warps stacked over the inputs, and, when each
// thread still has at least 256 inputs, the inputs split over up to a device's worth of blocks
// per output column. Measured: 138,412,032 B for the [32768, 1536] and 67,108,864 B for the
// [32768, 256] bf16 sums of Qwen2.5-1.5B's backward on an H100; none at 512 tokens.
int64_t ReductionStagingBytes(int64_t inputs, int64_t outputs);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_REDUCTION_STAGING_H_
