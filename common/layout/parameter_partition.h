// Which rank owns each parameter in a sharded run (SHARD_OPTIMIZER and SHARD_GRADIENTS): the
// owner alone keeps the parameter's optimizer state (and, sharding gradients, its gradient),
// updates it, and broadcasts the result.
//
// The rule, identical on every rank because it reads only the parameters' sizes and their order:
// take the parameters largest first (numel descending; equal sizes in model order) and give each
// to the rank that owns the fewest elements so far (ties: the lowest rank). It is the longest-
// processing-time rule, so no rank owns more than the least-loaded rank plus the largest
// parameter. A rank may own nothing when there are fewer parameters than ranks.
#ifndef VRAMLAB_COMMON_LAYOUT_PARAMETER_PARTITION_H_
#define VRAMLAB_COMMON_LAYOUT_PARAMETER_PARTITION_H_

#include <cstdint>
#include <vector>

namespace vramlab::layout {

// owner[i] is the rank of the parameter with numels[i] elements; world_size >= 1.
std::vector<int> PartitionParameters(const std::vector<int64_t>& numels, int world_size);

}  // namespace vramlab::layout

#endif  // VRAMLAB_COMMON_LAYOUT_PARAMETER_PARTITION_H_
