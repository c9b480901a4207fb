#include "server/estimate/estimator.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/spec_ranges.h"
#include "common/status_macros.h"
#include "server/estimate/device_model.h"
#include "server/estimate/estimate_notes.h"
#include "server/estimate/fit_verdict.h"
#include "server/estimate/parallel_buffers.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/replay_verdict.h"
#include "server/estimate/reserved_model.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/step_timeline.h"
#include "server/estimate/sweep_estimate.h"

namespace vramlab::server {
namespace {

using estimate::AllocatorKind;
using estimate::Device;
using estimate::RunSettings;

struct Prediction {
  vramlab::v1::MemoryAnatomy anatomy;
  estimate::StepPeaks peaks;
  estimate::FitDecision decision;
  int64_t gathered_parameters = 0;
  int64_t communication_buffer = 0;
  // Set where the replay decides the verdict (estimate::VerdictByReplay) and was run.
  bool replayed = false;
  // False: only the verdict is known (Need::kVerdict, decided without the replay or without the
  // replay's second placement).
  bool complete = true;
  estimate::ReplayVerdict replay;
};

// What a prediction is for: the whole answer, or only its verdict (the searches), which needs
// no replay once the step walk's allocated peak alone exceeds the limit and the band.
enum class Need { kAll, kVerdict };

Prediction Predict(const RunSettings& run, AllocatorKind allocator, int64_t limit,
                   const vramlab::v1::AllocatorConfig& allocator_config, Need need = Need::kAll) {
  const estimate::ParameterState params = estimate::EstimateParameterState(run);
  const estimate::StepPeaks peaks = estimate::WalkTrainingStep(run, params);
  Prediction p;
  p.peaks = peaks;
  p.gathered_parameters = params.gathered_parameters;
  p.communication_buffer = params.communication_buffer;
  if (!estimate::VerdictByReplay(run, allocator)) {
    p.decision = estimate::DecideFit(estimate::PredictReserved(run, peaks, allocator),
                                     estimate::MeasuredModelError(run, allocator), limit);
  } else if (need == Need::kVerdict && limit > 0 &&
             static_cast<double>(peaks.peak()) >
                 static_cast<double>(limit) * (1 + estimate::ReplayErrorBand(run).over)) {
    // Reserved is never below allocated: out of memory whatever the cache does.
    p.decision.verdict = vramlab::v1::DOES_NOT_FIT;
    p.complete = false;
  } else {
    p.replay =
        estimate::DecideFitByReplay(run, params, allocator_config, limit,
                                    need == Need::kAll ? estimate::OtherPlacement::kAlways
                                                       : estimate::OtherPlacement::kWhereItDecides);
    p.decision = p.replay.decision;
    p.replayed = true;
    p.complete = !p.replay.other_placement_skipped;
  }
  vramlab::v1::MemoryAnatomy& a = p.anatomy;
  a.set_weights_bytes(params.weights - params.adapter_weights - params.quantization_constants);
  a.set_adapter_weights_bytes(params.adapter_weights);
  a.set_quantization_constants_bytes(params.quantization_constants);
  a.set_gradients_bytes(params.gradients);
  a.set_optimizer_state_bytes(params.optimizer_state);
  a.set_activations_bytes(peaks.activations);
  a.set_temporary_buffers_bytes(params.step_temporaries);  // 0 with in_backward
  const int64_t peak = peaks.peak();
  // Reserved at the allocated peak by the rounding rules (reserved_model.h); fragmentation
  // enters the verdict's margin, not the anatomy.
  const int64_t reserved = estimate::RoundedReserved(allocator, peak);
  const int64_t context = run.device == Device::kCuda ? estimate::kCudaContextBytes : 0;
  a.set_allocator_cache_bytes(reserved - peak);
  a.set_cuda_context_bytes(context);
  a.set_peak_allocated_bytes(peak);
  a.set_peak_reserved_bytes(reserved);
  a.set_peak_device_used_bytes(reserved + context);
  a.set_fragmentation_ratio(reserved > 0 ? 1.0 - static_cast<double>(peak) / reserved : 0.0);
  return p;
}

// Largest value in [1, kSearchCeiling] for which `fits(value)` holds, 0 if none. `fits` is
// monotonic (more tokens never need less memory: estimator_test checks it), so bracketing then
// bisecting is exact from any start; starting at the spec's own value `start` spares the
// predictions (each an allocator replay) of the values far below it.
constexpr int64_t kSearchCeiling = int64_t{1} << 20;

template <typename FitsFn>
int32_t LargestFitting(FitsFn fits, int64_t start) {
  start = std::clamp<int64_t>(start, 1, kSearchCeiling);
  int64_t good = 0, bad = 0;
  if (fits(start)) {
    good = start;
    while (bad == 0) {
      const int64_t next = std::min(good * 2, kSearchCeiling);
      if (next == good) return static_cast<int32_t>(good);  // fits everything searched
      if (fits(next))
        good = next;
      else
        bad = next;
    }
  } else {
    bad = start;
    if (start == 1 || !fits(1)) return 0;
    good = 1;
  }
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (fits(mid))
      good = mid;
    else
      bad = mid;
  }
  return static_cast<int32_t>(good);
}

vramlab::v1::PointEstimate PointOf(int64_t value, const Prediction& point) {
  vramlab::v1::PointEstimate e;
  e.set_value(static_cast<int32_t>(value));
  e.set_peak_allocated_bytes(point.anatomy.peak_allocated_bytes());
  e.set_reserved_low_bytes(point.decision.reserved_low);
  e.set_reserved_high_bytes(point.decision.reserved_high);
  e.set_verdict(point.decision.verdict);
  e.set_peak_phase(point.peaks.peak_phase());
  *e.mutable_anatomy() = point.anatomy;
  return e;
}

// One rank of `run` run as `parallel` says, against `limit`.
vramlab::v1::ParallelEstimate PredictRank(const RunSettings& run,
                                          const estimate::ParallelSettings& parallel,
                                          AllocatorKind allocator, int64_t limit) {
  RunSettings rank = run;
  rank.parallel = parallel;
  // A rank's verdict is the step walk's (VerdictByReplay): no allocator settings needed.
  const Prediction p = Predict(rank, allocator, limit, vramlab::v1::AllocatorConfig{});
  vramlab::v1::ParallelEstimate out;
  out.set_world_size(static_cast<int32_t>(parallel.world_size));
  out.set_sharding(plain::EnumName(parallel.sharding));
  out.set_reshard_after_forward(parallel.reshard_after_forward);
  out.set_prefetch(parallel.prefetch);
  *out.mutable_anatomy() = p.anatomy;
  out.set_predicted_peak_bytes(p.anatomy.peak_allocated_bytes());
  out.set_peak_phase(p.peaks.peak_phase());
  out.set_verdict(p.decision.verdict);
  out.set_reserved_low_bytes(p.decision.reserved_low);
  out.set_reserved_high_bytes(p.decision.reserved_high);
  out.set_margin_bytes(p.decision.margin);
  out.set_deciding_phase(p.decision.deciding_phase);
  out.set_gathered_parameters_bytes(p.gathered_parameters);
  out.set_communication_buffer_bytes(p.communication_buffer);
  return out;
}

// Smallest world size in [1, kWorldSize.max] whose rank is FITS, 0 if none. A rank's memory never
// grows with the world size (shards only shrink; the buffers do not depend on it), so the first
// fitting size is the answer. Sizes the rulebook refuses (CheckRanksRunnable: with an in-backward
// or delayed update every size from 2) are skipped.
int32_t SmallestFittingWorldSize(const RunSettings& run, estimate::ParallelSettings parallel,
                                 AllocatorKind allocator, int64_t limit) {
  for (int64_t n = 1; n <= spec_rules::kWorldSize.max; ++n) {
    parallel.world_size = static_cast<int32_t>(n);
    if (!estimate::CheckRanksRunnable(run, parallel).ok()) continue;
    if (PredictRank(run, parallel, allocator, limit).verdict() == vramlab::v1::FITS) {
      return static_cast<int32_t>(n);
    }
  }
  return 0;
}

void SetReplay(const estimate::ReplayVerdict& v, vramlab::v1::MemoryEstimate::ReservedReplay* out) {
  const estimate::ReplayOutcome& r = v.replay;
  out->set_peak_reserved_bytes(r.peak_reserved);
  out->set_peak_allocated_bytes(r.peak_allocated);
  out->set_peak_reserved_phase(r.peak_reserved_at.phase);
  out->set_peak_reserved_step(r.peak_reserved_at.step);
  out->set_largest_segment_bytes(r.largest_segment);
  out->set_largest_segment_phase(r.largest_segment_at.phase);
  out->set_largest_segment_step(r.largest_segment_at.step);
  out->set_oom(r.oom);
  if (r.oom) {
    out->set_oom_phase(r.oom_at.phase);
    out->set_oom_step(r.oom_at.step);
    out->set_oom_micro_step(r.oom_at.micro_step);
    out->set_oom_requested_bytes(r.oom_request);
    out->set_oom_allocated_bytes(r.oom_allocated);
    out->set_oom_reserved_bytes(r.oom_reserved);
  }
  out->set_steps_replayed(r.steps);
  for (const estimate::ReplayPhasePeak& peak : r.phase_peaks) {
    auto* p = out->add_phase_peaks();
    p->set_phase(peak.at.phase);
    p->set_step(peak.at.step);
    p->set_micro_step(peak.at.micro_step);
    p->set_reserved_bytes(peak.reserved);
    p->set_allocated_bytes(peak.allocated);
  }
  if (v.replay_above.has_value()) {
    const estimate::ReplayOutcome& above = *v.replay_above;
    out->set_peak_reserved_above_bytes(above.peak_reserved);
    out->set_oom_above(above.oom);
  }
  out->set_error_band(v.band.under);
  out->set_error_band_over(v.band.over);
  out->set_reason(v.reason);
}

std::string ReplayNote(const vramlab::v1::MemoryEstimate& e) {
  const double gib = static_cast<double>(estimate::kGiB);
  const auto& r = e.replay();
  std::string note = absl::StrFormat(
      "reserved by replaying the predicted allocations of %d step(s) through the caching "
      "allocator's rules: peak %.2f GiB at the %s of step %d, largest segment %.2f GiB (%s of "
      "step %d); error band %.1f %% of the limit",
      r.steps_replayed(), r.peak_reserved_bytes() / gib,
      vramlab::v1::Phase_Name(r.peak_reserved_phase()), r.peak_reserved_step(),
      r.largest_segment_bytes() / gib, vramlab::v1::Phase_Name(r.largest_segment_phase()),
      r.largest_segment_step(), 100 * r.error_band());
  if (r.peak_reserved_above_bytes() > 0) {
    absl::StrAppend(
        &note, absl::StrFormat("; with new segments placed above the earlier ones: peak %.2f GiB%s",
                               r.peak_reserved_above_bytes() / gib,
                               r.oom_above() ? ", then out of memory" : ""));
  }
  const char* verdict = e.verdict() == vramlab::v1::FITS    ? "FITS"
                        : e.verdict() == vramlab::v1::TIGHT ? "TIGHT"
                                                            : "DOES_NOT_FIT";
  if (e.limit_bytes() <= 0) return note;
  return absl::StrCat("verdict ", verdict, r.reason().empty() ? "" : ": ", r.reason(), "; ", note);
}

std::string VerdictNote(const vramlab::v1::MemoryEstimate& e) {
  if (e.has_replay()) return ReplayNote(e);
  const double gib = static_cast<double>(estimate::kGiB);
  const std::string band = absl::StrFormat(
      "reserved %.2f .. %.2f GiB at the %s (margin %.2f GiB: fragmentation measured in such "
      "moments and the estimator's measured error)",
      e.reserved_low_bytes() / gib, e.reserved_high_bytes() / gib,
      vramlab::v1::Phase_Name(e.deciding_phase()), e.margin_bytes() / gib);
  switch (e.verdict()) {
    case vramlab::v1::FITS:
      return absl::StrCat("verdict FITS: ", band);
    case vramlab::v1::TIGHT:
      return absl::StrCat(
          "verdict TIGHT: the limit lies within the margin the model cannot "
          "resolve; ",
          band);
    case vramlab::v1::DOES_NOT_FIT:
      return absl::StrCat("verdict DOES_NOT_FIT: ", band);
    default:
      return "";
  }
}

// What every prediction of a spec shares: its settings for one process (the parallel settings
// taken out), the limit it is judged against and its allocator.
struct OneProcess {
  RunSettings base;
  estimate::ParallelSettings parallel;
  int64_t limit = 0;
  AllocatorKind allocator;
};

// `limit_bytes` overrides the spec's limit when non-zero (EstimateMemory's contract).
absl::StatusOr<OneProcess> ResolveOneProcess(const vramlab::v1::ExperimentSpec& spec,
                                             int64_t limit_bytes) {
  if (limit_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit_bytes: must not be negative, got ", limit_bytes));
  }
  ASSIGN_OR_RETURN(RunSettings base, estimate::ResolveRunSettings(spec));
  const estimate::ParallelSettings parallel = base.parallel;
  base.parallel = estimate::ParallelSettings{};
  const AllocatorKind allocator =
      estimate::AllocatorOf(base, spec.memory().allocator().expandable_segments());
  return OneProcess{std::move(base), parallel,
                    limit_bytes != 0 ? limit_bytes : spec.memory().device_memory_limit_bytes(),
                    allocator};
}

// `value`'s point of a one-process sweep over `base`: after other points in its worker unless it
// is a LIST's first (a search runs its points in an order only the measurements decide).
RunSettings SweepPointRun(const RunSettings& base, const estimate::SweepPlan& sweep,
                          int64_t value) {
  RunSettings run = estimate::AtSweepValue(base, sweep, value);
  run.after_other_points = base.after_other_points || sweep.search || value != sweep.first();
  return run;
}

}  // namespace

absl::StatusOr<vramlab::v1::MemoryEstimate> EstimateMemory(const vramlab::v1::ExperimentSpec& spec,
                                                           int64_t limit_bytes,
                                                           const EstimateOptions& options) {
  ASSIGN_OR_RETURN(OneProcess one, ResolveOneProcess(spec, limit_bytes));
  one.base.after_other_points = options.after_other_points;
  // Everything below is one process's until the rank's prediction at the end.
  const RunSettings& base = one.base;
  const estimate::ParallelSettings& parallel = one.parallel;
  const int64_t limit = one.limit;
  const AllocatorKind allocator = one.allocator;
  const estimate::SweepPlan sweep = estimate::PlanSweep(spec.sweep());
  const vramlab::v1::AllocatorConfig& conf = spec.memory().allocator();
  // The top level, the searches and the sweep's points differ from `base` only in seq_len and
  // micro_batch, and ask for the same settings more than once (a point's value is also a search
  // step; fits and not ruled out): each (seq_len, micro_batch) is predicted once.
  std::map<std::tuple<int64_t, int64_t, bool>, Prediction> predictions;
  auto predict_run = [&](const RunSettings& r, Need need) -> const Prediction& {
    const auto key = std::make_tuple(r.seq_len, r.micro_batch, r.after_other_points);
    auto it = predictions.find(key);
    if (it != predictions.end() && (it->second.complete || need == Need::kVerdict)) {
      return it->second;
    }
    Prediction fresh = Predict(r, allocator, limit, conf, need);
    if (it == predictions.end()) return predictions.emplace(key, std::move(fresh)).first->second;
    it->second = std::move(fresh);
    return it->second;
  };
  auto predict = [&](int64_t value) {
    return predict_run(SweepPointRun(base, sweep, value), Need::kAll);
  };
  auto verdict_of = [&](const RunSettings& r) {
    return predict_run(r, Need::kVerdict).decision.verdict;
  };
  auto fits = [&](const RunSettings& r) { return verdict_of(r) == vramlab::v1::FITS; };
  auto possible = [&](const RunSettings& r) { return verdict_of(r) != vramlab::v1::DOES_NOT_FIT; };
  // A sweep's top level is its first point (what must run at all); every point is listed.
  const RunSettings run = sweep.active ? estimate::AtSweepValue(base, sweep, sweep.first()) : base;

  const Prediction p = predict_run(run, Need::kAll);
  vramlab::v1::MemoryEstimate out;
  if (p.replayed) SetReplay(p.replay, out.mutable_replay());
  *out.mutable_anatomy() = p.anatomy;
  out.set_predicted_peak_bytes(p.anatomy.peak_allocated_bytes());
  out.set_peak_phase(p.peaks.peak_phase());
  out.set_limit_bytes(limit);
  out.set_parameter_count(estimate::ParameterCount(run.model));
  out.set_verdict(p.decision.verdict);
  out.set_reserved_low_bytes(p.decision.reserved_low);
  out.set_reserved_high_bytes(p.decision.reserved_high);
  out.set_margin_bytes(p.decision.margin);
  out.set_deciding_phase(p.decision.deciding_phase);
  out.set_fits(limit == 0 || p.decision.verdict == vramlab::v1::FITS);
  if (limit != 0) {
    auto with_seq = [&](int64_t seq) {
      RunSettings r = run;
      r.seq_len = seq;
      return r;
    };
    auto with_batch = [&](int64_t b) {
      RunSettings r = run;
      r.micro_batch = b;
      return r;
    };
    out.set_max_seq_len_that_fits(
        LargestFitting([&](int64_t v) { return fits(with_seq(v)); }, run.seq_len));
    out.set_max_micro_batch_that_fits(
        LargestFitting([&](int64_t v) { return fits(with_batch(v)); }, run.micro_batch));
    out.set_max_seq_len_not_ruled_out(
        LargestFitting([&](int64_t v) { return possible(with_seq(v)); }, run.seq_len));
    out.set_max_micro_batch_not_ruled_out(
        LargestFitting([&](int64_t v) { return possible(with_batch(v)); }, run.micro_batch));
  }
  if (sweep.active) {
    estimate::SetSweepPredictions(
        estimate::PredictSweep(sweep, limit,
                               [&](int64_t value) { return PointOf(value, predict(value)); }),
        &out);
  }
  if (parallel.parallel() || options.smallest_world_size) {
    *out.mutable_parallel() = PredictRank(run, parallel, allocator, limit);
    if (sweep.active && parallel.parallel()) {
      // Each point runs as its own gang of ranks: every point predicted for one rank.
      estimate::SetSweepPredictions(
          estimate::PredictSweep(sweep, limit,
                                 [&](int64_t value) {
                                   RunSettings rank = estimate::AtSweepValue(base, sweep, value);
                                   rank.parallel = parallel;
                                   return PointOf(value, Predict(rank, allocator, limit, conf));
                                 }),
          out.mutable_parallel());
    }
    if (options.smallest_world_size && limit != 0) {
      out.mutable_parallel()->set_smallest_world_size_that_fits(
          SmallestFittingWorldSize(run, parallel, allocator, limit));
      out.mutable_parallel()->set_searched_up_to(static_cast<int32_t>(spec_rules::kWorldSize.max));
    }
  }
  for (std::string& note : estimate::EstimateNotes(run, limit)) out.add_notes(std::move(note));
  if (parallel.parallel()) {
    RunSettings rank = run;
    rank.parallel = parallel;
    out.add_notes(estimate::ParallelNote(rank));
  }
  if (std::string note = VerdictNote(out); !note.empty()) out.add_notes(std::move(note));
  return out;
}

absl::StatusOr<vramlab::v1::PointEstimate> EstimateSweepPoint(
    const vramlab::v1::ExperimentSpec& spec, int64_t limit_bytes, int32_t value) {
  const estimate::SweepPlan sweep = estimate::PlanSweep(spec.sweep());
  if (!sweep.active) return absl::InvalidArgumentError("sweep: the spec has no sweep");
  if (value < 1) {
    return absl::InvalidArgumentError(absl::StrCat("value: must be positive, got ", value));
  }
  ASSIGN_OR_RETURN(const OneProcess one, ResolveOneProcess(spec, limit_bytes));
  return PointOf(value, Predict(SweepPointRun(one.base, sweep, value), one.allocator, one.limit,
                                spec.memory().allocator()));
}

}  // namespace vramlab::server
