// How `show` words the way a SEARCH_MAX sweep chose its points (Experiment.search,
// docs/ESTIMATOR.md, "Searches start from the prediction").
#ifndef VRAMLAB_CLIENT_SEARCH_START_TEXT_H_
#define VRAMLAB_CLIENT_SEARCH_START_TEXT_H_

#include <string>

#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// "from the prediction (largest predicted to fit: 1024); 2 points run, plain bisection 7: 5
// saved"; "plain bisection (sweep.plain_bisection asks for it); 7 points run". The counts once
// the search has ended. Empty for an experiment without Experiment.search.
std::string SearchStartText(const vramlab::v1::Experiment& experiment);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_SEARCH_START_TEXT_H_
