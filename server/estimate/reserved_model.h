// The caching allocator's reserved memory at each moment of a step, predicted from the allocated
// bytes the step walk gives (step_timeline.h): what the allocator's rounding rules add for
// certain (`low`), and what fragmentation may add on top (`fragmentation`), per moment. The
// rules and the measured fragmentation patterns behind each constant: docs/ESTIMATOR.md,
// "Does it fit"; the calibration: testdata/estimator/fit_calibration.jsonl and
// fit_calibration_test.cc.
#ifndef VRAMLAB_SERVER_ESTIMATE_RESERVED_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_RESERVED_MODEL_H_

#include <cstdint>
#include <vector>

#include "server/estimate/run_settings.h"
#include "server/estimate/step_timeline.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

enum class AllocatorKind {
  kCounting,    // the worker's CPU allocator: reserved == allocated, exact
  kNative,      // c10's caching allocator, default settings
  kExpandable,  // the same with expandable_segments:True
};

// Where in the step a moment lies decides which fragmentation pattern applies.
enum class Moment {
  kLoad,
  kForwardLayers,
  kLoss,            // final norm, lm_head and cross-entropy, forward or backward
  kBackwardLayers,  // a layer's backward, with its recomputed forward when checkpointed
  kOptimizerStep,   // the update: state created in the first step, temporaries
};

struct MomentReserved {
  Moment moment = Moment::kLoad;
  vramlab::v1::Phase phase = vramlab::v1::PHASE_UNSPECIFIED;
  int64_t allocated = 0;
  // Reserved by the rounding rules alone: segment and page rounding, the small pool.
  int64_t low = 0;
  // The largest tensor that cycles through the cache before this moment, and the reserved but
  // unusable bytes fragmentation may add here (a measured multiple of it; 0 where none was
  // measured).
  int64_t cycled_block = 0;
  int64_t fragmentation = 0;
};

AllocatorKind AllocatorOf(const RunSettings& run, bool expandable_segments);

// Every moment of the step with its reserved prediction; moments that do not occur in the run
// (an optimizer step that runs in backward) are left out.
std::vector<MomentReserved> PredictReserved(const RunSettings& run, const StepPeaks& peaks,
                                            AllocatorKind allocator);

// Reserved bytes for `allocated` bytes live, by the rounding rules of `allocator` alone.
int64_t RoundedReserved(AllocatorKind allocator, int64_t allocated);

// The largest single tensors of a micro-step: the loss's (fp32 logits of the whole micro-batch,
// or of one chunk) and a decoder layer's (the MLP's intermediate, eager attention's fp32
// scores, an fp32 hidden copy).
int64_t LargestLossTensor(const RunSettings& run);
int64_t LargestLayerTensor(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_RESERVED_MODEL_H_
