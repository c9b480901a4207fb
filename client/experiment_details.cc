#include "client/experiment_details.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/fit_verdict_text.h"
#include "client/parallel_estimate_text.h"
#include "client/rank_views.h"
#include "client/search_start_text.h"
#include "client/text_table.h"

namespace vramlab::client {

using vramlab::v1::Experiment;

namespace {

void AppendField(std::string& out, const char* label, const std::string& value) {
  absl::StrAppendFormat(&out, "%-14s %s\n", absl::StrCat(label, ":"), value);
}

double Seconds(const google::protobuf::Timestamp& t) { return t.seconds() + t.nanos() * 1e-9; }

const char* SweepVariableName(const Experiment& e) {
  return e.spec().sweep().variable() == vramlab::v1::MICRO_BATCH_SIZE ? "micro_batch" : "seq_len";
}

// The prediction of the one-process sweep point with `value`, where the stored prediction has one
// with its anatomy (the daemon adds each point a search ran as it ends); else nullptr.
const vramlab::v1::PointEstimate* PredictedSweepPoint(const Experiment& e, int64_t value) {
  if (!e.spec().has_sweep() || IsParallel(e) || !e.has_prediction()) return nullptr;
  const vramlab::v1::PointEstimate* point = FindPoint(e.prediction(), value);
  return point != nullptr && point->has_anatomy() ? point : nullptr;
}

// The value of the sweep point the final report's anatomy describes: the largest that fit, else
// (nothing fit) the last point run.
int64_t ReportedSweepValue(const Experiment& e) {
  if (e.report().largest_fitting_value() > 0) return e.report().largest_fitting_value();
  const vramlab::v1::SweepPointResult* last = nullptr;
  for (const auto& p : e.report().sweep_points()) {
    if (last == nullptr || p.sweep_index() > last->sweep_index()) last = &p;
  }
  return last == nullptr ? 0 : last->value();
}

// The value of the sweep point an out-of-memory answer came from, 0 if not found.
int64_t OomSweepValue(const Experiment& e) {
  for (const auto& p : e.report().sweep_points()) {
    if (p.sweep_index() == e.oom().sweep_index()) return p.value();
  }
  return 0;
}

std::string OomDetail(const Experiment& e) {
  if (!e.has_oom()) return "";
  const auto& oom = e.oom();
  std::string out = "\nout of memory:\n";
  absl::StrAppendFormat(&out, "  phase %s, step %d, micro-step %d", PhaseName(oom.phase()),
                        oom.step(), oom.micro_step());
  if (e.spec().has_sweep()) absl::StrAppend(&out, ", sweep point ", oom.sweep_index() + 1);
  absl::StrAppend(&out, "\n  requested ", FormatBytes(oom.requested_bytes()), ", free ",
                  FormatBytes(oom.free_bytes()));
  if (oom.has_memory()) {
    // The allocator's state when it refused the request, then the highest it had been.
    absl::StrAppend(&out, ", allocated ", FormatBytes(oom.memory().allocated_bytes()),
                    ", reserved ", FormatBytes(oom.memory().reserved_bytes()));
    absl::StrAppend(&out, "\n  peak allocated ", FormatBytes(oom.memory().peak_allocated_bytes()),
                    ", peak reserved ", FormatBytes(oom.memory().peak_reserved_bytes()));
    if (e.has_prediction()) {
      // A parallel run's OOM is one rank's: next to the prediction for one rank.
      const vramlab::v1::MemoryEstimate p =
          IsParallel(e) ? RankAsEstimate(e.prediction()) : e.prediction();
      if (!e.spec().has_sweep()) {
        absl::StrAppend(&out, "; predicted ", FormatBytes(p.anatomy().peak_allocated_bytes()),
                        " and ", FormatBytes(p.anatomy().peak_reserved_bytes()));
      } else if (const vramlab::v1::PointEstimate* point = FindPoint(p, OomSweepValue(e))) {
        // A sweep's OOM is one point's: next to that point's prediction, where there is one.
        absl::StrAppend(&out, "; predicted ", FormatBytes(point->peak_allocated_bytes()), " and ",
                        FormatBytes(point->reserved_low_bytes()), " at ", SweepVariableName(e), " ",
                        point->value());
        if (point->verdict() != vramlab::v1::FIT_VERDICT_UNSPECIFIED) {
          absl::StrAppend(&out, ", ", VerdictName(point->verdict()));
        }
      }
    }
  }
  absl::StrAppend(&out, "\n");
  if (!oom.message().empty()) absl::StrAppend(&out, "  ", oom.message(), "\n");
  return out;
}

// A parallel run's report is rank 0's: it stands next to the prediction for one rank.
std::string AnatomySection(const Experiment& e) {
  const bool parallel = IsParallel(e);
  const vramlab::v1::MemoryEstimate p = parallel ? RankAsEstimate(e.prediction()) : e.prediction();
  const auto* measured = e.has_report() ? &e.report().anatomy() : nullptr;
  // A sweep's report describes one of its points: next to that point's prediction where the
  // stored prediction has it.
  const vramlab::v1::PointEstimate* point =
      measured != nullptr ? PredictedSweepPoint(e, ReportedSweepValue(e)) : nullptr;
  const auto* predicted = point != nullptr     ? &point->anatomy()
                          : e.has_prediction() ? &p.anatomy()
                                               : nullptr;
  if (measured == nullptr && predicted == nullptr) return "";
  const bool per_rank = parallel && e.prediction().has_parallel();
  std::string out = "\nmemory anatomy";
  if (point != nullptr) absl::StrAppend(&out, " at ", SweepVariableName(e), " ", point->value());
  if (measured != nullptr && parallel) absl::StrAppend(&out, " of rank 0");
  if (measured != nullptr && per_rank) absl::StrAppend(&out, ", predicted per rank");
  if (measured == nullptr) {
    absl::StrAppend(&out, per_rank ? " (predicted per rank only: no final report)"
                                   : " (predicted only: no final report)");
  }
  absl::StrAppend(&out, ":\n", RenderAnatomyTable(measured, predicted));
  if (point != nullptr) {
    absl::StrAppend(&out, "predicted peak ", FormatBytes(point->peak_allocated_bytes()), " in ",
                    PhaseName(point->peak_phase()), " at ", SweepVariableName(e), " ",
                    point->value());
    if (p.limit_bytes() > 0) {
      absl::StrAppend(&out, "; limit ", FormatBytes(p.limit_bytes()), ": ",
                      VerdictName(point->verdict()), " (reserved ",
                      FormatBytes(point->reserved_low_bytes()), " .. ",
                      FormatBytes(point->reserved_high_bytes()), ")");
    }
    absl::StrAppend(&out, "\n");
  } else if (e.has_prediction()) {
    absl::StrAppend(&out, "predicted peak ", FormatBytes(p.predicted_peak_bytes()), " in ",
                    PhaseName(p.peak_phase()));
    if (p.limit_bytes() > 0) absl::StrAppend(&out, "; ", VerdictLine(p));
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace

std::string RenderSweepTable(const Experiment& e) {
  if (!e.has_report() || e.report().sweep_points_size() == 0) return "";
  using Align = TextTable::Align;
  const char* variable = SweepVariableName(e);
  // Predicted next to measured per point, where the stored prediction has the point (a parallel
  // run's points are rank 0's, next to the prediction for one rank).
  const vramlab::v1::MemoryEstimate prediction =
      IsParallel(e) ? RankAsEstimate(e.prediction()) : e.prediction();
  TextTable table({"point", variable, "result", "predicted", "peak allocated", "predicted alloc",
                   "peak reserved", "step time", "tokens/s", "steady steps"},
                  {Align::kRight, Align::kRight, Align::kLeft, Align::kLeft, Align::kRight,
                   Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  for (const auto& p : e.report().sweep_points()) {
    const vramlab::v1::PointEstimate* predicted = FindPoint(prediction, p.value());
    const std::string verdict = predicted == nullptr ? "-" : VerdictName(predicted->verdict());
    const std::string predicted_alloc =
        predicted == nullptr ? "-" : FormatBytes(predicted->peak_allocated_bytes());
    if (p.oom()) {
      table.AddRow({absl::StrCat(p.sweep_index() + 1), absl::StrCat(p.value()), "OOM", verdict, "",
                    predicted_alloc});
      continue;
    }
    table.AddRow(
        {absl::StrCat(p.sweep_index() + 1), absl::StrCat(p.value()), "fits", verdict,
         FormatBytes(p.anatomy().peak_allocated_bytes()), predicted_alloc,
         FormatBytes(p.anatomy().peak_reserved_bytes()),
         p.steady_steps() > 0 || p.warmup_steps() == 0 ? FormatSeconds(p.step_time_seconds()) : "-",
         TokensPerSecondSummary(p.tokens_per_second(), p.steady_steps(), p.warmup_steps()),
         p.warmup_steps() == 0 ? "-" : absl::StrCat(p.steady_steps())});
  }
  std::string out = absl::StrCat("\nsweep:\n", table.Render());
  if (e.report().largest_fitting_value() > 0) {
    absl::StrAppend(&out, "largest ", variable, " that fits: ", e.report().largest_fitting_value(),
                    "\n");
  }
  if (prediction.limit_bytes() > 0 && prediction.points_size() > 0) {
    if (e.spec().sweep().mode() == vramlab::v1::SEARCH_MAX) {
      absl::StrAppend(&out, "predicted: FITS up to ", prediction.predicted_search_fits_up_to(),
                      ", not ruled out up to ", prediction.predicted_search_not_ruled_out_up_to(),
                      "\n");
    } else if (prediction.predicted_first_oom_value() > 0) {
      absl::StrAppend(
          &out, "predicted first point not to fit: ", prediction.predicted_first_oom_value(), "\n");
    }
  }
  return out;
}

std::string RenderOutcomeLine(const Experiment& e) {
  std::string out = absl::StrCat(e.id(), " ", OutcomeSummary(e));
  if (e.start_time().seconds() > 0 && e.end_time().seconds() > 0) {
    absl::StrAppend(&out, " after ",
                    FormatSeconds(Seconds(e.end_time()) - Seconds(e.start_time())));
  }
  return absl::StrCat(out, "\n");
}

std::string RenderOutcome(const Experiment& e) {
  std::string out = RenderOutcomeLine(e);
  absl::StrAppend(&out, OomDetail(e), AnatomySection(e), RenderRankSection(e), RenderSweepTable(e));
  if (e.has_snapshot()) {
    absl::StrAppend(&out, "\nallocator snapshot: vramlab snapshot ", e.id(), " -o ", e.id(),
                    ".pickle\n");
  }
  return out;
}

// Where a command experiment's numbers come from: its PyTorch probe, or only the driver's view
// when the program never imported torch (the probe's report then names no device) or sent
// nothing at all (not a Python program).
static std::string CommandProbeSummary(const Experiment& e) {
  if (e.state() == Experiment::QUEUED || e.state() == Experiment::RUNNING) return "-";
  if (!e.has_report()) {
    return "no probe report (not a PyTorch program, or it ended before reporting)";
  }
  switch (e.report().measured_by()) {
    case vramlab::v1::FinalReport::GPU_DRIVER_PROCESSES:
      return "the driver's view only: not a PyTorch program (peak device used is what the GPU "
             "driver listed for the job's processes, read by the daemon)";
    case vramlab::v1::FinalReport::GPU_DRIVER_DEVICE:
      return "the driver's view only: not a PyTorch program (peak device used is the GPU's use "
             "above its level at the job's start, other processes included: the driver's pids "
             "are not the daemon's)";
    case vramlab::v1::FinalReport::PROCESS_RESIDENT_SET:
      return "the driver's view only: not a PyTorch program (peak device used is the process's "
             "peak resident set)";
    default:
      break;
  }
  // A report stored without measured_by marks a torch-less run by its empty device name.
  if (e.report().device_name().empty()) {
    return "the driver's view only: not a PyTorch program (peak device used is the process's "
           "peak resident set)";
  }
  return "the vramlab probe inside the program (PyTorch allocator and hooks)";
}

std::string RenderExperimentDetails(const Experiment& e) {
  std::string out;
  AppendField(out, "id", e.id());
  AppendField(out, "name", e.spec().name().empty() ? "-" : e.spec().name());
  AppendField(out, "owner", e.owner());
  std::string state = OutcomeSummary(e);
  if (e.state() == Experiment::QUEUED && e.queue_position() > 0) {
    absl::StrAppend(&state, " (position ", e.queue_position(), " in queue)");
  }
  AppendField(out, "state", state);
  if (e.held())
    AppendField(out, "held", absl::StrCat("yes: it starts after 'vramlab release ", e.id(), "'"));
  if (!e.after_id().empty()) {
    AppendField(out, "after",
                absl::StrCat(e.after_id(),
                             e.after_ok() ? " (only if it succeeds)" : " (whatever its outcome)"));
  }
  if (e.state() == Experiment::QUEUED && e.has_estimated_start_time()) {
    AppendField(out, "starts",
                absl::StrCat("by ", FormatTimestamp(e.estimated_start_time()), " (",
                             StartEstimateText(e, absl::Now()), "), ", e.start_estimate_basis()));
  }
  AppendField(out, "settings", SpecSummary(e.spec()));
  if (e.spec().has_command()) {
    AppendField(out, "command", absl::StrJoin(e.spec().command().argv(), " "));
    AppendField(out, "working dir", e.spec().command().working_dir());
    AppendField(out, "measured by", CommandProbeSummary(e));
  }
  AppendField(out, "created", FormatTimestamp(e.create_time()));
  AppendField(out, "started", FormatTimestamp(e.start_time()));
  AppendField(out, "ended", FormatTimestamp(e.end_time()));
  if (e.state() != Experiment::QUEUED) AppendField(out, "slot", absl::StrCat(e.slot()));
  if (IsParallel(e)) AppendField(out, "ranks", WorldAndSlots(e));
  if (e.attempts() > 0) AppendField(out, "attempts", absl::StrCat(e.attempts()));
  if (e.resumed_sweep_points() > 0) {
    // The first points in the sweep's order, numbered from 1 as the sweep table numbers them.
    const int points = e.resumed_sweep_points();
    AppendField(out, "resumed",
                absl::StrCat(points, points == 1 ? " sweep point" : " sweep points",
                             " taken from before the restart (",
                             points == 1 ? "point 1" : absl::StrCat("points 1-", points), ")"));
  }
  if (e.has_search()) AppendField(out, "search", SearchStartText(e));
  if (e.has_report()) {
    const auto& r = e.report();
    AppendField(out, "device", r.device_name().empty() ? "-" : r.device_name());
    AppendField(out, "parameters", absl::StrCat(r.parameter_count()));
    AppendField(out, "attention", r.attention_backend().empty() ? "-" : r.attention_backend());
    AppendField(out, "step time",
                StepTimeSummary(r.median_step_time_seconds(), r.steady_steps(), r.warmup_steps(),
                                r.warmup_step_time_seconds()));
    AppendField(out, "tokens/s",
                TokensPerSecondSummary(r.tokens_per_second(), r.steady_steps(), r.warmup_steps()));
    if (r.mfu() > 0) AppendField(out, "MFU", FormatPercent(r.mfu()));
    AppendField(out, "final loss", absl::StrFormat("%.4f", r.final_loss()));
  }
  AppendField(out, "snapshot", e.has_snapshot() ? "yes (vramlab snapshot ID -o FILE)" : "no");
  absl::StrAppend(&out, OomDetail(e), AnatomySection(e), RenderRankSection(e), RenderSweepTable(e));
  return out;
}

}  // namespace vramlab::client
