// A spec's memory.allocator: what its free-form `extra` may hold, and the value of
// PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF it makes. The caching allocator reads that value
// once, when CUDA starts, so the daemon sets it in a new worker's environment and a standalone
// worker re-executes itself with it. The numbers' ranges are spec_ranges.h's.
#ifndef VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
#define VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_

#include <cstddef>
#include <string>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::spec_rules {

// memory.allocator.extra becomes part of an environment variable: at most this many bytes, and
// only the characters of the allocator's key:value,key:value syntax.
inline constexpr size_t kMaxAllocatorExtraBytes = 256;
bool IsAllocatorExtraChar(char c);

// "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,<extra>";
// empty when nothing is set (0 leaves a number unset; `extra` is appended as given). Expects
// validated settings. The daemon passes plain::FromProto of its message.
std::string AllocatorConfString(const plain::AllocatorConfig& settings);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_ALLOCATOR_CONF_H_
