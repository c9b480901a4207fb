// Does a run fit its limit: FITS, TIGHT or DOES_NOT_FIT, from the reserved memory predicted at
// each moment of the step (reserved_model.h) and the estimator's measured error. The rule and
// its calibration: docs/ESTIMATOR.md, "Does it fit".
#ifndef VRAMLAB_SERVER_ESTIMATE_FIT_VERDICT_H_
#define VRAMLAB_SERVER_ESTIMATE_FIT_VERDICT_H_

#include <cstdint>
#include <vector>

#include "server/estimate/reserved_model.h"
#include "server/estimate/run_settings.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

// How far the allocated prediction has been from the measurement, as fractions of the
// prediction: `under` the most it fell short, `over` the most it exceeded.
struct ModelError {
  double under = 0;
  double over = 0;
};

ModelError MeasuredModelError(const RunSettings& run, AllocatorKind allocator);

struct FitDecision {
  vramlab::v1::FitVerdict verdict = vramlab::v1::FIT_VERDICT_UNSPECIFIED;
  vramlab::v1::Phase deciding_phase = vramlab::v1::PHASE_UNSPECIFIED;
  // Of the deciding moment: reserved by rounding alone, and with fragmentation and the model's
  // underestimate; margin = high - low * (1 - over), the band the model cannot resolve.
  int64_t reserved_low = 0;
  int64_t reserved_high = 0;
  int64_t margin = 0;
};

// Over every moment m (allocated a, rounding-only reserved low, fragmentation f):
//   high(m) = low + f + under * a;   floor(m) = low * (1 - over)
//   DOES_NOT_FIT when some floor(m) > limit; FITS when every high(m) <= limit; else TIGHT.
// The deciding moment is the one with the largest floor (DOES_NOT_FIT) or high (otherwise).
// `limit` 0: no limit, verdict FIT_VERDICT_UNSPECIFIED.
FitDecision DecideFit(const std::vector<MomentReserved>& moments, const ModelError& error,
                      int64_t limit);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_FIT_VERDICT_H_
