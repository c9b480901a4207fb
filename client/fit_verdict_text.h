// How the CLI words the estimator's fit verdict (FITS / TIGHT / DOES_NOT_FIT, the reserved band
// and its margin) and the predictions of a sweep's points, for estimate, show, watch and report.
#ifndef VRAMLAB_CLIENT_FIT_VERDICT_TEXT_H_
#define VRAMLAB_CLIENT_FIT_VERDICT_TEXT_H_

#include <cstdint>
#include <string>

#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// "FITS", "TIGHT", "DOES NOT FIT"; for an estimate stored before verdicts existed, from `fits`.
std::string VerdictName(const vramlab::v1::MemoryEstimate& estimate);
std::string VerdictName(vramlab::v1::FitVerdict verdict);

// "FITS (reserved 20.62 GiB .. 21.98 GiB at the backward)"; "TIGHT: within the 5.10 GiB margin
// the model cannot resolve (reserved ...)"; "DOES NOT FIT (reserved ...)". Empty without a limit.
// With the allocator replay (MemoryEstimate.replay): where it runs out and the failing request
// ("DOES NOT FIT: out of memory in the forward of step 2 asking for 1.16 GiB (...)"), or why it
// is TIGHT, then the replay's peak reserved and largest segment, each with its phase and step.
std::string VerdictDetail(const vramlab::v1::MemoryEstimate& estimate);
// "limit 24.00 GiB: " and the detail; empty without a limit.
std::string VerdictLine(const vramlab::v1::MemoryEstimate& estimate);

// The estimate of the sweep point with `value`, or nullptr.
const vramlab::v1::PointEstimate* FindPoint(const vramlab::v1::MemoryEstimate& estimate,
                                            int64_t value);

// "predicted 23.35 GiB, TIGHT" for a sweep point, or "" when the estimate has no such point.
std::string PointPredictionText(const vramlab::v1::MemoryEstimate& estimate, int64_t value);

// The sweep's predicted points as a table (value, peak allocated, reserved low .. high,
// verdict) with the predicted first OOM (LIST) or boundary (`search`: SEARCH_MAX); empty
// without points.
std::string RenderPredictedSweep(const vramlab::v1::MemoryEstimate& estimate, const char* variable,
                                 bool search);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FIT_VERDICT_TEXT_H_
