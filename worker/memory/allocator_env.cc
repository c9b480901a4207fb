#include "worker/memory/allocator_env.h"

#include <cstdlib>

#include "common/spec/allocator_conf.h"

namespace vramlab::worker {

std::string AllocatorConfString(const SpecAllocator& a) {
  spec_rules::AllocatorSettings settings;
  settings.expandable_segments = a.expandable_segments;
  settings.max_split_size_mb = a.max_split_size_mb;
  settings.garbage_collection_threshold = a.garbage_collection_threshold;
  settings.extra = a.extra;
  return spec_rules::AllocatorConfString(settings);
}

bool AllocatorEnvPresent() {
  return std::getenv("PYTORCH_CUDA_ALLOC_CONF") != nullptr || std::getenv("PYTORCH_ALLOC_CONF") != nullptr;
}

void SetAllocatorEnv(const std::string& conf) {
  setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
  setenv("PYTORCH_ALLOC_CONF", conf.c_str(), 1);
}

}  // namespace vramlab::worker
