// What the device adds on top of the tensors a step needs: the CUDA caching allocator's rounding
// and segment sizes, and the memory the CUDA context takes outside the allocator. On the CPU the
// worker's counting allocator records every tensor's exact nbytes, so nothing is added there.
#ifndef VRAMLAB_SERVER_ESTIMATE_DEVICE_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_DEVICE_MODEL_H_

#include <cstdint>

namespace vramlab::server::estimate {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// c10/cuda/CUDACachingAllocator.cpp: every block is a multiple of kMinBlockSize (512 bytes);
// requests up to kSmallSize (1 MiB) come from 2 MiB segments (kSmallBuffer); requests under
// kMinLargeAlloc (10 MiB) from 20 MiB segments (kLargeBuffer); larger ones get a segment of their
// own rounded up to kRoundLarge (2 MiB).
constexpr int64_t kCudaMinBlockBytes = 512;
constexpr int64_t kCudaSmallRequestBytes = 1 * kMiB;
constexpr int64_t kCudaSmallSegmentBytes = 2 * kMiB;
constexpr int64_t kCudaLargeSegmentBytes = 20 * kMiB;
constexpr int64_t kCudaMinLargeAllocBytes = 10 * kMiB;
constexpr int64_t kCudaRoundLargeBytes = 2 * kMiB;

// Device memory outside the caching allocator (context, kernel images, cuBLAS/cuDNN handles):
// the worker measured 804,061,184 B (767 MiB) in every sdpa run on the H200 with torch 2.11 +
// CUDA 13, 751 MiB in eager runs and 781 MiB with CPU offload (DESIGN.md, "Figures and their
// definitions"). It is not subject to setMemoryFraction, so it does not count against an emulated
// card's limit.
constexpr int64_t kCudaContextBytes = 804061184;

// cuBLAS workspaces, handed out by the caching allocator on the first matmul of each thread
// (ATen/cuda/CublasHandlePool.cpp: 32 MiB per handle and stream on Hopper, sm_90) and kept: one
// for the training thread's forward, one for autograd's device thread in backward.
constexpr int64_t kCudaBlasWorkspaceBytes = 32 * kMiB;
constexpr int64_t kCudaBlasWorkspaceThreads = 2;

enum class Device { kCuda, kCpu };

// Bytes the allocator accounts for one tensor of `nbytes` (allocated_bytes counts rounded blocks).
inline int64_t AllocatedBytes(Device device, int64_t nbytes) {
  if (device == Device::kCpu || nbytes <= 0) return nbytes < 0 ? 0 : nbytes;
  return (nbytes + kCudaMinBlockBytes - 1) / kCudaMinBlockBytes * kCudaMinBlockBytes;
}

// Bytes of the segment cudaMalloc'd for a request that finds no free cached block.
inline int64_t SegmentBytes(int64_t nbytes) {
  if (nbytes <= kCudaSmallRequestBytes) return kCudaSmallSegmentBytes;
  if (nbytes < kCudaMinLargeAllocBytes) return kCudaLargeSegmentBytes;
  return (nbytes + kCudaRoundLargeBytes - 1) / kCudaRoundLargeBytes * kCudaRoundLargeBytes;
}

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_DEVICE_MODEL_H_
