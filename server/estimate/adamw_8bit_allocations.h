// 8-bit AdamW's optimizer step, tensor by tensor in the order the worker's range path allocates
// and frees (worker/optim/adamw_8bit_rule.cc, blockwise_quantizer.cc, rule_optimizer.cc): every
// parameter's state created first (step 0), then each parameter updated in ranges of
// kDeviceUpdateRangeElements (parameter_state.h), each range with its fp32 copies, the moments
// dequantised, AdamW's denominator and the requantisation's temporaries. The worker built without
// kernels/optim (no fused multi-tensor update) takes this path on CUDA. Part of
// step_allocations.h's plan.
#ifndef VRAMLAB_SERVER_ESTIMATE_ADAMW_8BIT_ALLOCATIONS_H_
#define VRAMLAB_SERVER_ESTIMATE_ADAMW_8BIT_ALLOCATIONS_H_

#include <cstdint>
#include <vector>

#include "server/estimate/allocation_log.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// The step over the trainable tensors of `elements` (the update's order). With `create_state`
// (the first step) each tensor's state is made first and its ids pushed onto `state`, kept, as
// are the two code maps the first quantised update makes. Unless `all_ranges`, each kind of
// range (its length, quantised or not) is listed twice at most: the later ones leave the
// allocator as it is.
void PlanAdamW8bitStep(const RunSettings& run, const std::vector<int64_t>& elements,
                       bool create_state, AllocationLog* log, std::vector<int64_t>* state,
                       bool all_ranges = false);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ADAMW_8BIT_ALLOCATIONS_H_
