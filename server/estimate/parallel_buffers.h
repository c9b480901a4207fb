// What a rank of a data-parallel run holds beyond its shards of the model states: the parameters
// SHARD_FULL gathers for the units that run, and the gradients on their way to the collective
// that combines them across ranks. The layouts and the constants: docs/PARALLEL.md, "Per rank".
#ifndef VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_
#define VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// Rows (dim 0) of every entry of ParameterTensorElements(model), in its order: embed_tokens
// [V, h]; per layer q [h, h] and bias [h], k and v [kv, h] and biases [kv], o [h, h], gate and up
// [I, h], down [h, I], two norms [h]; the final norm [h]; lm_head [V, h] when untied.
std::vector<int64_t> ParameterTensorRows(const ModelShape& model);

// Rows of the i-th entry of ListAdapterTensors(run).trainable (A then B of each wrapped
// projection): lora_A is [rank, in], lora_B [out, rank].
int64_t AdapterTensorRows(const RunSettings& run, size_t index, int64_t elements);

// SHARD_FULL's chunk of one parameter of `elements` elements in `rows` rows, as the worker lays it
// out (common/layout/shard_layout.h, which the worker uses): ceil(rows / N) rows of elements / rows
// elements, the same on every rank (the last chunks padded with zero rows). A rank's shard, its
// shard gradient and the optimizer's view of it have this many elements; the gathered parameter has
// N times it.
int64_t FullShardChunkElements(int64_t elements, int64_t rows, int64_t world_size);

// The NF4 buffers of one QLoRA-quantised projection of `elements` elements (common/spec/
// adapter_sizes.h): packed codes (bytes), absmax codes (bytes), absmax scales (fp32). SHARD_FULL
// shards each as a 1-D tensor, ceil(n / N) elements a rank, and gathers N times that.
struct Nf4Buffers {
  int64_t codes = 0;
  int64_t absmax_codes = 0;
  int64_t scales = 0;
};
Nf4Buffers Nf4BufferElements(int64_t elements);

// The rank a SHARD_OPTIMIZER / SHARD_GRADIENTS estimate reports: under the worker's partition
// (common/layout/parameter_partition.h) over `numels`, the rank whose owned bytes (the sum of
// owned_bytes[i] over the tensors it owns: the optimizer state and, sharding gradients, the
// gradients it keeps after backward) are the most; ties to the lowest rank. Everything else a rank
// holds is the same on every rank, so this is the rank whose peak is highest. owned[i] says whether
// it owns numels[i].
struct BusiestRank {
  int rank = 0;
  std::vector<bool> owned;
};
BusiestRank BusiestOwner(const std::vector<int64_t>& numels,
                         const std::vector<int64_t>& owned_bytes, int64_t world_size);

// The sharding's units, as the worker's SHARD_FULL lays them out (worker/parallel/full_shard.h):
// one per decoder layer, and the root (every parameter outside the layers: embed_tokens, the
// final norm, lm_head when untied). With an adapter a layer's parameters include its adapters
// (in their dtype) and only the adapters have gradients.
struct ShardingUnits {
  // Gathered under SHARD_FULL: the padded storage of every parameter of the unit, N chunks.
  int64_t layer_gathered_bytes = 0;  // one decoder layer's
  int64_t root_gathered_bytes = 0;
  // The unit's full gradients (its trainable parameters', unpadded), as autograd makes them.
  int64_t layer_gradient_bytes = 0;
  int64_t root_gradient_bytes = 0;
  // What the unit's reduce-scatter holds while in flight (worker/parallel/full_shard.h,
  // peak_communication_bytes): per trainable parameter its padded full gradient, N chunks (the
  // gradient itself, or its zero-padded copy where the rows do not divide by N), and with
  // gradient accumulation the received chunk added to the shard gradient (every micro-batch
  // after a step's first).
  int64_t layer_reduce_bytes = 0;
  int64_t root_reduce_bytes = 0;
};

ShardingUnits UnitsOf(const RunSettings& run);

// SHARD_FULL's reduce-scatters over one micro-batch's backward, walked as the worker issues them:
// the root's full gradients from the loss on; each layer, from the top down, makes its gradients
// (autograd holds them) and then, at its post-backward, hands them to its reduce-scatter; the
// root's last, after backward. With prefetch a reduce-scatter is waited for only after the next
// one is issued (two in flight at that moment); without, where it is issued.
struct ReduceScatterPeaks {
  // The largest total held by reduce-scatters in flight at once: the worker's
  // communication_buffers_bytes.
  int64_t in_flight = 0;
  // The largest total of that and the full gradients autograd holds at the same moment.
  int64_t with_unreduced = 0;
};
ReduceScatterPeaks WalkReduceScatters(const ShardingUnits& units, int64_t layers, bool prefetch);

// Sets params->gathered_parameters and params->communication_buffer (and, under SHARD_FULL,
// params->unreduced_gradients) for `run`'s rank, as the worker runs it (docs/PARALLEL.md, "The
// shardings"):
//   SHARD_FULL gathers the root for all of forward and backward (never resharded after forward)
//   and the decoder layers: with reshard_after_forward two at a time with prefetch (the running
//   one and the next, whose all-gather is issued ahead), one without; else every layer (each stays
//   gathered from its forward until its backward ends; all are at once at the loss). The
//   communication buffer and the unreduced gradients: WalkReduceScatters.
//   SHARD_GRADIENTS: every gradient is whole on every rank until the reduce to its owner, a
//   decoder layer at a time during backward (worker/parallel/gradient_reduction.h); the buffer:
//   the most of the others' gradients held by reduces in flight at once
//   (OthersGradients::MostInFlight; the step walk adds each as backward makes it and takes it off
//   as its reduce completes).
//   SHARD_NONE and SHARD_OPTIMIZER: none (the gradients are all-reduced in place).
// Both stay 0 in one process (world size 1). Under SHARD_GRADIENTS params->others_gradients must
// be set first.
void AddParallelBuffers(const RunSettings& run, ParameterState* params);

// The estimate's note for a rank of `run` (world size >= 2): the layout and the buffers assumed.
std::string ParallelNote(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_PARALLEL_BUFFERS_H_
