#include "worker/memory/allocator_env.h"

#include <cstdlib>

namespace vramlab::worker {

bool AllocatorEnvPresent() {
  return std::getenv("PYTORCH_CUDA_ALLOC_CONF") != nullptr ||
         std::getenv("PYTORCH_ALLOC_CONF") != nullptr;
}

void SetAllocatorEnv(const std::string& conf) {
  setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
  setenv("PYTORCH_ALLOC_CONF", conf.c_str(), 1);
}

}  // namespace vramlab::worker
