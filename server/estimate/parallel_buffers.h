// What a rank of a data-parallel run holds beyond its shards of the model states: the parameters
// SHARD_FULL gathers for the units that run, and the gradients on their way to the collective
// that combines them across ranks. The layouts and the constants: docs/PARALLEL.md, "Per rank".
#ifndef VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_
#define VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_

#include <cstdint>
#include <string>

#include "server/estimate/device_model.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// SHARD_NONE and SHARD_OPTIMIZER all-reduce the full gradients in buckets (DDP): gradients are
// views of the buckets (gradient_as_bucket_view), and one bucket of DDP's default cap
// (bucket_cap_mb = 25) is counted in flight; never more than all the gradients.
constexpr int64_t kAllReduceBucketBytes = 25 * kMiB;

// The sharding's units, as FSDP2's fully_shard lays them out: one per decoder layer, and the root
// (every parameter outside the layers: embed_tokens, the final norm, lm_head when untied).
struct ShardingUnits {
  int64_t layer_bytes = 0;  // one decoder layer's full parameters (as many bytes as its gradients)
  int64_t root_bytes = 0;   // the root's full parameters
};

ShardingUnits UnitsOf(const RunSettings& run);

// Sets params->gathered_parameters and params->communication_buffer for `run`'s rank:
//   SHARD_FULL gathers the root for all of forward and backward (FSDP2 does not reshard the root
//   after forward) and the decoder layers: two at once (the running one and the prefetched next)
//   with reshard_after_forward, else every layer (each stays gathered from its forward until its
//   backward ends; all are at once at the loss).
//   SHARD_GRADIENTS and SHARD_FULL reduce-scatter a unit's full gradients when its backward ends:
//   in flight are one layer's and the root's (the root's wait for the end of backward).
//   SHARD_NONE and SHARD_OPTIMIZER: one all-reduce bucket, kAllReduceBucketBytes.
// Both stay 0 in one process (world size 1).
void AddParallelBuffers(const RunSettings& run, ParameterState* params);

// The estimate's note for a rank of `run` (world size >= 2): the layout and the buffers assumed.
std::string ParallelNote(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_
