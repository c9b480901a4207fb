#include "worker/memory/allocator_env.h"

#include <cstdlib>
#include <sstream>

namespace vramlab::worker {

std::string AllocatorConfString(const SpecAllocator& a) {
  std::ostringstream conf;
  auto add = [&conf](const std::string& item) {
    if (conf.tellp() > 0) conf << ',';
    conf << item;
  };
  if (a.expandable_segments) add("expandable_segments:True");
  if (a.max_split_size_mb > 0) add("max_split_size_mb:" + std::to_string(a.max_split_size_mb));
  if (a.garbage_collection_threshold > 0) {
    std::ostringstream threshold;
    threshold << a.garbage_collection_threshold;
    add("garbage_collection_threshold:" + threshold.str());
  }
  if (!a.extra.empty()) add(a.extra);
  return conf.str();
}

bool AllocatorEnvPresent() {
  return std::getenv("PYTORCH_CUDA_ALLOC_CONF") != nullptr || std::getenv("PYTORCH_ALLOC_CONF") != nullptr;
}

void SetAllocatorEnv(const std::string& conf) {
  setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
  setenv("PYTORCH_ALLOC_CONF", conf.c_str(), 1);
}

}  // namespace vramlab::worker
