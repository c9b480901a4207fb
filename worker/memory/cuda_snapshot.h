// Allocator history and the snapshot pickle PyTorch's memory viewer reads. LibTorch 2.x with CUDA
// only (torch/csrc/cuda/memory_snapshot.h); elsewhere both report that they are unavailable.
#ifndef VRAMLAB_WORKER_MEMORY_CUDA_SNAPSHOT_H_
#define VRAMLAB_WORKER_MEMORY_CUDA_SNAPSHOT_H_

#include <string>

namespace vramlab::worker {

// Starts recording every allocation and free with its C++ stack (bounded ring of entries).
bool StartCudaMemoryHistory(std::string* why_not);

// Writes torch::cuda::_memory_snapshot_pickled() to `path` (written to a temporary name and
// renamed, so a reader never sees half a file).
bool WriteCudaMemorySnapshot(const std::string& path, std::string* why_not);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_CUDA_SNAPSHOT_H_
