#include "server/estimate/replay_verdict.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "server/estimate/device_model.h"
#include "server/estimate/step_allocations.h"

namespace vramlab::server::estimate {
namespace {

// The replay's error against the calibration's runs it decides (testdata/estimator/
// fit_calibration.jsonl; fit_calibration_test prints every row), by what the replay models: a
// fresh process. On the runs that were their worker's first and that fit, whose tensors the
// sequence lists one by one as the recorded traces show them, its peak reserved less the measured
// one spans -0.15 % .. +0.60 % of the limit (41 rows, eager and sdpa, full fine-tuning, LoRA and
// QLoRA under both allocators, AdamW, SGD and 8-bit AdamW): each side rounded up to the next half
// percent, 0.5 % under and 1 % over. 8-bit AdamW's update inside backward is listed by
// proportion: +1.34 % in the calibration, so 2.5 % either way as the later points. A later point
// of a one-process sweep inherits its worker's cache: on the 37 such rows that fit it spans
// -2.29 % .. +0.80 %, so 2.5 % under and 1 % over. docs/ESTIMATOR.md, "Reserved by replay".
constexpr ErrorBand kListedBand = {0.005, 0.01};
// QLoRA under the default allocator: of its fresh runs that fit, the calibration's one replays
// exactly and three first points of the QLoRA seeds (docs/results/h200-2026-12-06-seeds/) within
// their printed figures' 0.01 GiB; seed 44's first point (Llama-3.1-8B, 27,648 tokens) read
// 3.1 % of the limit above its replay, not yet explained by a trace: 3.5 % under until it is.
constexpr ErrorBand kQloraDefaultAllocatorBand = {0.035, 0.01};
constexpr ErrorBand kPartlyListedBand = {0.025, 0.025};
constexpr ErrorBand kAfterOtherPointsBand = {0.025, 0.01};

std::string Where(const ReplayPoint& at) {
  return absl::StrFormat("the %s of step %d", vramlab::v1::Phase_Name(at.phase), at.step);
}

double Gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

// QLoRA without expandable segments: its own fresh band, and no replay of a later sweep point.
bool QloraUnderDefaultAllocator(const RunSettings& run, AllocatorKind allocator) {
  return run.adapter.qlora && allocator != AllocatorKind::kExpandable;
}

// Whether the sequence lists some of `run`'s tensors by proportion rather than one by one as the
// recorded traces show them: 8-bit AdamW's update inside backward.
bool ListedInPart(const RunSettings& run) {
  return run.in_backward && run.optimizer == vramlab::v1::ADAMW_8BIT;
}

}  // namespace

ErrorBand ReplayErrorBand(const RunSettings& run, AllocatorKind allocator) {
  if (run.after_other_points) return kAfterOtherPointsBand;
  if (ListedInPart(run)) return kPartlyListedBand;
  return QloraUnderDefaultAllocator(run, allocator) ? kQloraDefaultAllocatorBand : kListedBand;
}

bool VerdictByReplay(const RunSettings& run, AllocatorKind allocator) {
  // QLoRA's later sweep points under the default allocator: the cache the earlier points leave
  // is cut to their sizes, and the calibration's one such sweep (seed 23) ran out at a point the
  // fresh-process replay fits (docs/ESTIMATOR.md, "Reserved by replay").
  return run.device == Device::kCuda && !run.parallel.parallel() && !run.fused_kernels &&
         !(QloraUnderDefaultAllocator(run, allocator) && run.after_other_points);
}

ReplayVerdict DecideFitByReplay(const RunSettings& run, const ParameterState& params,
                                const vramlab::v1::AllocatorConfig& allocator, int64_t limit) {
  ReplayVerdict v;
  v.band = ReplayErrorBand(run, AllocatorOf(run, allocator.expandable_segments()));
  const std::vector<AllocationEvent> events =
      PlanStepAllocations(run, params, kReplaySteps, kReplayMicroSteps);
  v.replay = ReplayAllocations(events, SimConfigOf(allocator, limit));
  const ReplayOutcome& r = v.replay;
  FitDecision& d = v.decision;
  d.deciding_phase = r.oom ? r.oom_at.phase : r.peak_reserved_at.phase;
  d.reserved_low = r.peak_reserved;
  d.reserved_high = r.peak_reserved;
  if (limit <= 0) return v;
  const auto bytes_of = [limit](double fraction) {
    return static_cast<int64_t>(std::ceil(fraction * static_cast<double>(limit)));
  };
  const int64_t under_bytes = bytes_of(v.band.under);
  const int64_t over_bytes = bytes_of(v.band.over);
  d.margin = under_bytes;
  if (!r.oom) {
    d.reserved_low = r.peak_reserved;
    d.reserved_high = r.peak_reserved + under_bytes;
    if (r.peak_reserved + under_bytes <= limit) {
      d.verdict = vramlab::v1::FITS;
      return v;
    }
    d.verdict = vramlab::v1::TIGHT;
    v.reason = absl::StrFormat("peak reserved %.2f GiB within %.1f %% of the limit at %s",
                               Gib(r.peak_reserved), 100 * v.band.under, Where(r.peak_reserved_at));
    return v;
  }
  // Out of memory under the limit: does it still with the band's room?
  d.margin = over_bytes;
  const ReplayOutcome wider = ReplayAllocations(events, SimConfigOf(allocator, limit + over_bytes));
  d.reserved_low = r.oom_reserved;
  d.reserved_high = wider.oom ? wider.oom_reserved + wider.oom_request : wider.peak_reserved;
  if (wider.oom) {
    d.verdict = vramlab::v1::DOES_NOT_FIT;
    v.reason = absl::StrFormat(
        "runs out of memory in %s asking for %.2f GiB with %.2f GiB allocated, %.2f GiB "
        "reserved",
        Where(r.oom_at), Gib(r.oom_request), Gib(r.oom_allocated), Gib(r.oom_reserved));
    return v;
  }
  d.verdict = vramlab::v1::TIGHT;
  v.reason = absl::StrFormat(
      "runs out of memory in %s asking for %.2f GiB, but fits %.1f %% above the limit "
      "(peak reserved %.2f GiB)",
      Where(r.oom_at), Gib(r.oom_request), 100 * v.band.over, Gib(wider.peak_reserved));
  return v;
}

}  // namespace vramlab::server::estimate
