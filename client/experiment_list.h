// The table of `vramlab ls`: one line per experiment.
#ifndef VRAMLAB_CLIENT_EXPERIMENT_LIST_H_
#define VRAMLAB_CLIENT_EXPERIMENT_LIST_H_

#include <string>

#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

// Columns ID, OWNER, STATE, NAME, SETTINGS, PEAK, QUEUE; when some listed experiment is a parallel
// run, a RANKS column after SETTINGS with world size × slots ("2×[0,1]"; "-" for one process).
// PEAK is peak allocated: of a parallel run the largest over its ranks; of a run that ran out of
// memory before its report, the peak up to the failure, marked "(OOM)". Then a line saying there
// are more when the response has a next page.
std::string RenderExperimentList(const vramlab::v1::ListExperimentsResponse& experiments);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_EXPERIMENT_LIST_H_
