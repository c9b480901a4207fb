// The value of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF for a spec's memory.allocator: the
// caching allocator reads it once, when CUDA starts, so the daemon sets it in a new worker's
// environment and a standalone worker re-executes itself with it.
#ifndef VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
#define VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_

#include <string>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::spec_rules {

// "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,<extra>";
// empty when nothing is set (0 leaves a number unset; `extra` is appended as given). Expects
// validated settings. The daemon passes plain::FromProto of its message.
std::string AllocatorConfString(const plain::AllocatorConfig& settings);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
