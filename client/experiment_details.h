// The text of `vramlab show`: everything known about one experiment, in sections.
#ifndef VRAMLAB_CLIENT_EXPERIMENT_DETAILS_H_
#define VRAMLAB_CLIENT_EXPERIMENT_DETAILS_H_

#include <string>

#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// Identity, state, times, settings, outcome, anatomy (measured vs predicted), sweep points, OOM.
std::string RenderExperimentDetails(const vramlab::v1::Experiment& experiment);

// "exp-000042 SUCCEEDED after 12.0 s\n": the outcome alone (watch --quiet).
std::string RenderOutcomeLine(const vramlab::v1::Experiment& experiment);

// Outcome line plus the anatomy table (and sweep table, OOM detail): how a followed run ends.
std::string RenderOutcome(const vramlab::v1::Experiment& experiment);

// One row per sweep point: value, fits/OOM, peak allocated, peak reserved, step time, tokens/s.
// Empty when the experiment has no sweep results.
std::string RenderSweepTable(const vramlab::v1::Experiment& experiment);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_EXPERIMENT_DETAILS_H_
