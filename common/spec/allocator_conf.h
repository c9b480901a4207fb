// The value of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF for a spec's memory.allocator: the
// caching allocator reads it once, when CUDA starts, so the daemon sets it in a new worker's
// environment and a standalone worker re-executes itself with it.
#ifndef VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
#define VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_

#include <cstdint>
#include <string>

namespace vramlab::spec_rules {

struct AllocatorSettings {
  bool expandable_segments = false;
  int64_t max_split_size_mb = 0;            // 0: unset
  double garbage_collection_threshold = 0;  // 0: unset
  std::string extra;                        // appended as given (validated characters)
};

// "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,<extra>";
// empty when nothing is set. Expects validated settings.
std::string AllocatorConfString(const AllocatorSettings& settings);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
