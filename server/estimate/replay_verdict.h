// The fit verdict from the caching allocator's own rules: a run's predicted allocations
// (step_allocations.h) replayed under the spec's allocator settings and limit
// (reserved_replay.h). FITS when the replay never fails and its peak reserved stays below the
// limit by more than the replay has read below a measured run; DOES_NOT_FIT when it fails even
// under the limit widened by as much as it has read above one; TIGHT otherwise, with the reason.
// Under the default allocator the replay runs twice, each new segment placed below the earlier
// ones (as the driver mostly places them) and above (SegmentPlacement: best fit's ties follow
// addresses): FITS needs both to fit, TIGHT names both where only the first does; running out is
// the first placement's. The band and the measurements it rests on: docs/ESTIMATOR.md,
// "Reserved by replay".
#ifndef VRAMLAB_SERVER_ESTIMATE_REPLAY_VERDICT_H_
#define VRAMLAB_SERVER_ESTIMATE_REPLAY_VERDICT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "server/estimate/fit_verdict.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/reserved_model.h"
#include "server/estimate/reserved_replay.h"
#include "server/estimate/run_settings.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

// Steps and micro-batches replayed: the first step (the cache built, the optimizer state
// created in its optimizer phase) and the second (the state alive, the first step's cache
// reserved; later steps repeat its allocations into the cache it leaves); a cycle's first
// micro-batch and one accumulating micro-batch.
constexpr int32_t kReplaySteps = 2;
constexpr int32_t kReplayMicroSteps = 2;

// The replay's measured error, each side a fraction of the limit. `under`: the most a run's
// measured peak reserved has exceeded its replayed one (what FITS must leave below the limit);
// `over`: the most the replayed one has exceeded the measured (the room above the limit a
// replay that runs out is given before it is DOES_NOT_FIT).
struct ErrorBand {
  double under = 0;
  double over = 0;
};

// For a fresh process, narrow where the sequence lists every tensor and wider where it lists
// some in part; wider for a later point of a one-process sweep (docs/ESTIMATOR.md, "Reserved by
// replay").
ErrorBand ReplayErrorBand(const RunSettings& run);

struct ReplayVerdict {
  FitDecision decision;
  ReplayOutcome replay;  // under the limit (none when limit is 0), new segments below the earlier
  // The same allocations with each new segment above the earlier ones (SegmentPlacement); none
  // with expandable segments, or where other_placement_skipped. FITS holds for both placements.
  std::optional<ReplayOutcome> replay_above;
  // OtherPlacement::kWhereItDecides left replay_above out where it could not change the verdict
  // (the usual placement does not fit).
  bool other_placement_skipped = false;
  ErrorBand band;
  std::string reason;  // why TIGHT, or where DOES_NOT_FIT runs out
};

// Whether the replay decides `run`'s verdict under `allocator`: a single process on a CUDA device
// with the ATEN kernels, full fine-tuning or an adapter (adapter_allocations.h lists each wrapped
// projection's tensors, qlora_load_allocations.h QLoRA's quantisation), whose tensors
// step_allocations.h lists. The CPU's counting allocator keeps reserved == allocated; FUSED
// kernels, a rank of a parallel run and a later point of a one-process QLoRA sweep under the
// default allocator keep the step walk's verdict (fit_verdict.h).
bool VerdictByReplay(const RunSettings& run, AllocatorKind allocator);

// Whether the replay with new segments above the earlier ones is run for an estimate's answer
// (kAlways: its peak is shown) or only where it can take FITS away (kWhereItDecides: a search's
// verdict).
enum class OtherPlacement { kAlways, kWhereItDecides };

// `limit` 0: no limit (verdict FIT_VERDICT_UNSPECIFIED; the replay's peaks are still given).
ReplayVerdict DecideFitByReplay(const RunSettings& run, const ParameterState& params,
                                const vramlab::v1::AllocatorConfig& allocator, int64_t limit,
                                OtherPlacement other_placement = OtherPlacement::kAlways);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_REPLAY_VERDICT_H_
