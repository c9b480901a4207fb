#include "worker/memory/cuda_snapshot.h"

#include <cstdio>
#include <fstream>
#include <optional>

#include <torch/version.h>

#if defined(VRAMLAB_WITH_CUDA) && TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/cuda/memory_snapshot.h>
#define VRAMLAB_HAVE_CUDA_SNAPSHOT 1
#endif

namespace vramlab::worker {

#if defined(VRAMLAB_HAVE_CUDA_SNAPSHOT)

namespace {
// The newest entries kept; older ones are dropped first. Two steps of an 8B QLoRA run, its
// quantisation included, make about 125,000 entries (an allocation is one, its free two), so
// a trace of such a run starts at the allocator's start (bench/estimator/snapshot_to_trace.py).
constexpr size_t kMaxHistoryEntries = 250000;
}  // namespace

bool StartCudaMemoryHistory(std::string* why_not) {
  try {
    torch::cuda::_record_memory_history(std::optional<std::string>("all"),
                                        std::optional<std::string>("all"), std::string("all"),
                                        kMaxHistoryEntries);
    return true;
  } catch (const std::exception& e) {
    *why_not = e.what();
    return false;
  }
}

bool WriteCudaMemorySnapshot(const std::string& path, std::string* why_not) {
  try {
    const std::string pickle = torch::cuda::_memory_snapshot_pickled();
    const std::string partial = path + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out.write(pickle.data(), static_cast<std::streamsize>(pickle.size()));
      if (!out.good()) {
        *why_not = "cannot write " + partial;
        return false;
      }
    }
    if (std::rename(partial.c_str(), path.c_str()) != 0) {
      *why_not = "cannot rename " + partial + " to " + path;
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    *why_not = e.what();
    return false;
  }
}

#else

bool StartCudaMemoryHistory(std::string* why_not) {
  *why_not = "allocation history needs LibTorch 2.x with CUDA";
  return false;
}

bool WriteCudaMemorySnapshot(const std::string&, std::string* why_not) {
  *why_not = "allocator snapshots need LibTorch 2.x with CUDA";
  return false;
}

#endif

}  // namespace vramlab::worker
