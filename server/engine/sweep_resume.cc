#include "server/engine/sweep_resume.h"

#include "absl/strings/str_cat.h"

namespace vramlab::server {

using vramlab::v1::Experiment;
using vramlab::v1::FinalReport;
using vramlab::v1::SweepPointResult;
using vramlab::v1::WorkerEvent;

namespace {

// The report a worker that ran only `result`'s point (--sweep-point) sends of it, as
// worker/train/experiment_runner.cc fills it: the point, and the run's fields from the point.
// The fields of the worker's end (snapshot written, sampler overhead) are left unset.
FinalReport ReportOfResult(const SweepPointResult& result,
                           const std::optional<vramlab::v1::WorkerStarted>& started) {
  FinalReport report;
  *report.add_sweep_points() = result;
  *report.mutable_anatomy() = result.anatomy();
  if (!result.oom()) report.set_largest_fitting_value(result.value());
  report.set_attention_backend(result.attention_backend());
  report.set_median_step_time_seconds(result.step_time_seconds());
  report.set_tokens_per_second(result.tokens_per_second());
  report.set_mfu(result.mfu());
  report.set_final_loss(result.final_loss());
  report.set_steady_steps(result.steady_steps());
  report.set_warmup_steps(result.warmup_steps());
  report.set_warmup_step_time_seconds(result.warmup_step_time_seconds());
  if (started.has_value()) {
    report.set_parameter_count(started->parameter_count());
    report.set_device_name(started->device_name());
  }
  return report;
}

}  // namespace

StoredSweepEvents::StoredSweepEvents(int world_size) : world_size_(world_size) {}

StoredSweepEvents::Attempt& StoredSweepEvents::Latest() {
  // Events stored before any launch's state change (none is, unless that event was lost) count
  // as one attempt of their own.
  if (attempts_.empty()) attempts_.emplace_back();
  return attempts_.back();
}

StoredSweepEvents::RankResult* StoredSweepEvents::ResultOf(int rank, int32_t index) {
  std::vector<RankResult>& ranks = Latest().points[index];
  if (ranks.empty()) ranks.resize(world_size_);
  return &ranks[rank];
}

std::string StoredSweepEvents::Who(int rank) const {
  return world_size_ == 1 ? "the worker" : absl::StrCat("rank ", rank);
}

void StoredSweepEvents::Add(const vramlab::v1::ExperimentEvent& event) {
  if (event.has_state_change()) {
    if (event.state_change().state() == Experiment::RUNNING) attempts_.emplace_back();
    return;
  }
  if (!event.has_worker_event()) return;
  const WorkerEvent& worker = event.worker_event();
  const int rank = worker.rank();
  if (rank < 0 || rank >= world_size_) return;
  switch (worker.payload_case()) {
    case WorkerEvent::kStarted:
      Latest().started = worker.started();
      break;
    case WorkerEvent::kSweepPoint: {
      RankResult* result = ResultOf(rank, worker.sweep_point().sweep_index());
      // A gang's rank reports its point once: a second result cannot be told from the first.
      if (result->point.has_value()) result->conflict = "sent two results of it";
      result->point = worker.sweep_point();
      break;
    }
    case WorkerEvent::kReport: {
      if (worker.report().sweep_points_size() != 1) return;
      RankResult* result = ResultOf(rank, worker.report().sweep_points(0).sweep_index());
      if (result->report.has_value()) result->conflict = "sent two reports of it";
      result->report = worker.report();
      break;
    }
    case WorkerEvent::kOom:
      ResultOf(rank, worker.oom().sweep_index())->oom = worker.oom();
      break;
    default:
      break;
  }
}

std::optional<StoredSweepPoint> StoredSweepEvents::Ended(const Attempt& attempt, int32_t index,
                                                         int32_t value, std::string* why) const {
  auto it = attempt.points.find(index);
  if (it == attempt.points.end()) return std::nullopt;
  StoredSweepPoint ended;
  ended.point = {index, value};
  for (int r = 0; r < world_size_; ++r) {
    const RankResult& result = it->second[r];
    const std::string rank = Who(r);
    if (!result.conflict.empty()) {
      *why = absl::StrCat(rank, " ", result.conflict);
      return std::nullopt;
    }
    if (!result.point.has_value()) {
      *why = absl::StrCat(rank, " has no result of it");
      return std::nullopt;
    }
    if (result.point->value() != value) {
      *why = absl::StrCat(rank, " ran it at value ", result.point->value());
      return std::nullopt;
    }
    if (result.report.has_value()) {
      const SweepPointResult& reported = result.report->sweep_points(0);
      if (reported.value() != value || reported.oom() != result.point->oom()) {
        *why = absl::StrCat(rank, "'s report does not match its result");
        return std::nullopt;
      }
      ended.reports.push_back(*result.report);
    } else if (world_size_ == 1) {
      // A worker that ran the whole sweep sent no report of the point alone.
      ended.reports.push_back(ReportOfResult(*result.point, attempt.started));
    } else {
      *why = absl::StrCat(rank, " has no report of it");
      return std::nullopt;
    }
    ended.ooms.push_back(result.oom);
    if (result.point->oom()) {
      ended.out_of_memory = true;
      if (!ended.deciding_rank.has_value()) ended.deciding_rank = r;
    }
  }
  return ended;
}

SweepResumePlan StoredSweepEvents::Plan(const vramlab::v1::SweepSpec& sweep) const {
  SweepResumePlan plan;
  spec_rules::SweepOrder order = SweepOrderOf(sweep);
  while (const std::optional<int32_t> value = order.Next()) {
    const int32_t index = order.next_index();
    std::optional<StoredSweepPoint> ended;
    std::string why;
    // The latest attempt that ended the point; the latest reason when none did.
    for (auto attempt = attempts_.rbegin(); attempt != attempts_.rend() && !ended; ++attempt) {
      std::string attempt_why;
      ended = Ended(*attempt, index, *value, &attempt_why);
      if (why.empty()) why = attempt_why;
    }
    if (!ended.has_value()) {
      if (!why.empty()) {
        plan.next_runs_again =
            absl::StrCat("point ", index, " (value ", *value, ") runs again: ", why);
      }
      return plan;
    }
    order.Record(ended->out_of_memory);
    plan.taken.push_back(*std::move(ended));
  }
  plan.sweep_over = true;
  return plan;
}

void TakeStoredPoints(const std::vector<StoredSweepPoint>& points, ParallelSweep& sweep) {
  for (const StoredSweepPoint& stored : points) {
    for (int r = 0; r < static_cast<int>(stored.reports.size()); ++r) {
      sweep.OnReport(r, stored.reports[r]);
    }
    sweep.EndPoint(stored.out_of_memory, stored.deciding_rank);
  }
}

std::string ResumedPointsNote(int points) {
  return absl::StrCat(points, points == 1 ? " sweep point" : " sweep points",
                      " taken from before the restart");
}

}  // namespace vramlab::server
