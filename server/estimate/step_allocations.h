// The allocations and frees a run makes on its device, tensor by tensor, in the order the worker
// makes them (worker/train/fixed_shape_run.cc, worker/model/): the weights at LOAD; per step and
// micro-step the token ids and forward tensors, each decoder layer's saved and transient tensors
// (eager attention's scores blocks, the MLP's intermediates, the norms' fp32 copies), the loss's
// logits (fp32 for the full loss), backward's gradients of every activation and, as backward
// reaches each parameter, its gradient; the optimizer step's state (created in the first step)
// and temporaries; zero_grad. Sizes are the ones activation_model.cc and parameter_state.cc
// count, rounded as the device's allocator accounts them; an adapter's projections as
// adapter_allocations.h lists them; where a mode's tensors are not listed one by one (fused
// kernels, qk-norms, an adapter's saved A output) each layer's and the loss's saved bytes are
// topped up to the step walk's (step_timeline.h) with one block. The sequence is what
// reserved_replay.h replays through CachingAllocatorSim. Contract and the tensors of each moment:
// docs/ESTIMATOR.md, "Reserved by replay".
#ifndef VRAMLAB_SERVER_ESTIMATE_STEP_ALLOCATIONS_H_
#define VRAMLAB_SERVER_ESTIMATE_STEP_ALLOCATIONS_H_

#include <cstdint>
#include <vector>

#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

struct AllocationEvent {
  enum Kind { kAlloc, kFree };
  Kind kind = kAlloc;
  int64_t id = 0;     // unique among live tensors; never reused
  int64_t bytes = 0;  // kAlloc: the request (before the allocator's rounding)
  vramlab::v1::Phase phase = vramlab::v1::PHASE_UNSPECIFIED;
  int32_t step = 0;  // the worker's numbering: 0 is the first step (LOAD: 0)
  int32_t micro_step = 0;
};

// The run's first `steps` steps (at most run.steps; at least 1) of at most `micro_steps`
// micro-batches each (the later micro-batches of a cycle repeat the second's allocations).
// Single process only: a rank of a parallel run is not listed (its verdict stays the step walk's).
// `every_8bit_range` lists each of 8-bit AdamW's update ranges rather than two of each kind
// (adamw_8bit_allocations.h; the replay's outcome is the same).
std::vector<AllocationEvent> PlanStepAllocations(const RunSettings& run,
                                                 const ParameterState& params, int32_t steps,
                                                 int32_t micro_steps,
                                                 bool every_8bit_range = false);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_STEP_ALLOCATIONS_H_
