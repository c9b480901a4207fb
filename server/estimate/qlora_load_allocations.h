// QLoRA's LOAD on the device, tensor by tensor, as worker/adapters/qlora.cc makes it: the model is
// built on the host, AttachQlora makes the shared lookup tables, quantises every wrapped
// projection's weight onto the device (nf4.cc's QuantizeNf4: the codes and block absmax, then
// slices of at most 2^17 blocks through fp32 temporaries, then the absmax's double quantisation
// through blockwise_quantizer.cc), and then moves every other parameter over in
// named_parameters() order (a projection's adapter after its bias). The quantisation's
// temporaries decide where the default allocator's large segments lie before the first step.
#ifndef VRAMLAB_SERVER_ESTIMATE_QLORA_LOAD_ALLOCATIONS_H_
#define VRAMLAB_SERVER_ESTIMATE_QLORA_LOAD_ALLOCATIONS_H_

#include "server/estimate/allocation_log.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// Writes LOAD's allocations and frees into `log` (its phase already LOAD). Requires
// run.adapter.qlora.
void PlanQloraLoad(const RunSettings& run, AllocationLog* log);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_QLORA_LOAD_ALLOCATIONS_H_
