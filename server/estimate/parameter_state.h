// Memory that scales with the parameter count: weights, gradients, optimizer state and the
// temporaries of the update. Computed tensor by tensor (ParameterTensorElements) so that the CUDA
// allocator's per-tensor rounding, the 8-bit optimizer's per-tensor blocks and the worker's
// update paths (worker/optim/) are followed exactly. For a rank of a parallel run, each category
// the sharding divides holds what the worker gives the rank (docs/PARALLEL.md): SHARD_FULL the
// padded dim-0 chunk of every tensor; SHARD_OPTIMIZER and SHARD_GRADIENTS the whole tensors the
// rank owns under the worker's largest-first partition, of the busiest rank.
#ifndef VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_
#define VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_

#include <cstdint>
#include <vector>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// 8-bit AdamW's blocks and the fp32 master update's upcast groups:
// common/layout/optimizer_layout.h.

// worker/optim/host_stepper.h: the update runs over ranges of at most this many elements (device
// ranges when no multi-tensor kernel applies; host tasks on the CPU).
constexpr int64_t kDeviceUpdateRangeElements = int64_t{16} << 20;
constexpr int64_t kHostUpdateTaskElements = int64_t{64} << 10;

// SHARD_GRADIENTS: the gradients of the tensors other ranks own, by the part of backward that
// makes them. A rank's backward makes every gradient, as one process's does, and hands each
// decoder layer's to the reduce to their owners once the layer's backward is done; that reduce
// completes, and the rank frees these, when the layer below is done
// (worker/parallel/gradient_reduction.h: at most two layers' in flight). The root's (the final
// norm's, lm_head's, the embedding's) are reduced after backward. step_timeline.cc adds each as
// backward makes it and takes it off as its reduce completes.
struct OthersGradients {
  // Made before the decoder layers' backward: the final norm's and (untied) lm_head's.
  int64_t before_layers = 0;
  // Made in decoder layer i's backward, i in model order (backward makes layers[0]'s last).
  std::vector<int64_t> layers;
  // Made in the embedding's backward: embed_tokens'.
  int64_t embedding = 0;
  // All of them: what one process's backward makes beyond the rank's own.
  int64_t all = 0;

  // Made before decoder layer `index`'s backward starts: before_layers and every layer above it
  // (index -1: before the embedding's, every layer).
  int64_t MadeBeforeLayer(int64_t index) const;
  // Freed before decoder layer `index`'s backward starts (index -1: the embedding's): every layer
  // above index + 1, whose reduce completed at the post-backward of the layer below it.
  int64_t ReducedBeforeLayer(int64_t index) const;
  // The most of them held by reduces in flight at once (the worker's communication_buffers_bytes
  // under SHARD_GRADIENTS): two adjacent layers', or layer 0's with the root's (before_layers and
  // the embedding's, reduced after backward).
  int64_t MostInFlight() const;
};

struct ParameterState {
  // Every weight held on the device: with an adapter, the frozen base weights (NF4 codes for
  // QLoRA's projections) plus the two below.
  int64_t weights = 0;
  int64_t adapter_weights = 0;
  int64_t quantization_constants = 0;
  // Held after a backward: all gradients (0 with in_backward, whose updates free each gradient).
  int64_t gradients = 0;
  // Device state after the first step: moments, fp32 master weights, 8-bit scales and maps.
  // Offload moves it off a CUDA device; on the CPU device host memory is the device.
  int64_t optimizer_state = 0;
  // Above weights + gradients + state while Step() runs (0 with in_backward).
  int64_t step_temporaries = 0;
  // Temporaries of one parameter's update inside backward (in_backward only).
  int64_t in_backward_update_temporaries = 0;
  // The vocabulary-sized gradient (embedding, or lm_head when untied), produced first in backward.
  int64_t head_gradient = 0;
  // Gradients of one decoder layer, as its backward makes them (under SHARD_GRADIENTS every rank
  // makes all of them; see others_gradients).
  int64_t layer_gradients = 0;
  // All gradients the rank keeps after a backward, whatever the mode (under SHARD_GRADIENTS its
  // own: the others' are others_gradients).
  int64_t all_gradients = 0;
  // Optimizer state of one decoder layer's parameters and of the vocabulary-sized parameter
  // (in_backward creates state as backward reaches each parameter).
  int64_t layer_state = 0;
  // Tensor by tensor, for one process: every trainable tensor's gradient and optimizer state, in
  // the order the update walks them (ParameterTensorElements order; with an adapter
  // ListAdapterTensors' trainable order, layer 0's first).
  std::vector<int64_t> tensor_gradients, tensor_state;
  int64_t head_state = 0;
  // Peak above the weights while they are initialized (random init makes an fp32 copy of each
  // matrix on the host; counted only where the host is the device). Under SHARD_FULL, `weights`
  // are the rank's shards and this also holds the rest of the whole model, which every rank
  // builds before sharding it (LOAD's peak: the whole model plus one shard).
  int64_t load_temporaries = 0;
  // A rank of a parallel run (parallel_buffers.h): the full parameters of the units gathered at
  // once (SHARD_FULL; alive in forward and backward), and the gradients in flight to their
  // all-reduce or reduce-scatter (alive in backward). 0 in one process.
  int64_t gathered_parameters = 0;
  int64_t communication_buffer = 0;
  // SHARD_GRADIENTS: the others' gradients, which the step walk adds as backward makes them and
  // takes off as their reduces complete (the communication buffer is the part of them held by
  // reduces in flight, which the walk therefore does not add again). Empty otherwise.
  OthersGradients others_gradients;
  // SHARD_FULL: the full gradients autograd holds beside the reduce-scatters in flight, at the
  // fullest moment of backward (ReduceScatterPeaks::with_unreduced less in_flight). Counted with
  // the communication buffer in every moment of backward; not a proto field.
  int64_t unreduced_gradients = 0;
  // The rank these bytes are of: under SHARD_OPTIMIZER and SHARD_GRADIENTS the busiest owner
  // (parallel_buffers.h, BusiestOwner); 0 otherwise, where every rank holds the same.
  int reported_rank = 0;
};

ParameterState EstimateParameterState(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_PARAMETER_STATE_H_
