// Walks one training step the way the worker runs it (worker/train/fixed_shape_run.cc: forward
// layer by layer and the loss, backward layer by layer, the optimizer step) and records the most
// memory live in each phase, from the per-layer and per-parameter sizes. For a rank of a parallel
// run the parameter sizes are its shards, and its gathered parameters and communication buffer
// (parameter_state.h) are held through forward and backward, and backward, respectively; under
// SHARD_GRADIENTS the buffer, the others' gradients, grows as backward makes them.
#ifndef VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_
#define VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_

#include <cstdint>

#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

struct StepPeaks {
  int64_t load = 0;
  int64_t forward = 0;
  int64_t backward = 0;
  int64_t optimizer_step = 0;
  // The most live at the loss (final norm, lm_head, cross-entropy) in forward and in backward;
  // forward and backward above are these or the decoder layers' moments, whichever is larger.
  int64_t forward_loss = 0;
  int64_t backward_loss = 0;
  // The same inside the decoder layers (the embedding's backward included).
  int64_t forward_layers = 0;
  int64_t backward_layers = 0;
  // As the worker measures it (worker/train/anatomy_builder.h): the forward+backward peak of a
  // micro-step above the larger of its two ends (before forward, after backward).
  int64_t activations = 0;

  int64_t peak() const;
  vramlab::v1::Phase peak_phase() const;
};

StepPeaks WalkTrainingStep(const RunSettings& run, const ParameterState& params);

// Whether layer `index` (0-based) is checkpointed: layers 0, k, 2k, ...
bool IsCheckpointed(const RunSettings& run, int64_t index);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_
