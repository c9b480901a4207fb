// Walks one training step the way the worker runs it (forward layer by layer, loss, backward
// layer by layer, optimizer step) and records the most memory live in each phase. Phase peaks
// come from the per-layer and per-parameter sizes; nothing here knows about tensors.
#ifndef VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_
#define VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_

#include <cstdint>

#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

struct StepPeaks {
  int64_t forward = 0;
  int64_t backward = 0;
  int64_t optimizer_step = 0;  // 0 with in_backward: the update happens inside backward
  // Forward/backward peak minus the parameter state live at that moment (weights, optimizer
  // state, gradients): what MemoryAnatomy calls activations.
  int64_t activations = 0;

  int64_t peak() const;
  vramlab::v1::Phase peak_phase() const;
};

StepPeaks WalkTrainingStep(const RunSettings& run, const ParameterState& params);

// Whether layer `index` (0-based) is recomputed in backward: layers 0, k, 2k, ...
bool IsCheckpointed(const RunSettings& run, int64_t index);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_STEP_TIMELINE_H_
