// The Engine's side of resuming a sweep after a restart (sweep_resume.h): at recovery a queued
// sweep's points that had ended are read from its stored events; each launch takes them into the
// sweep instead of running them (a one-process sweep with points taken then runs one worker per
// remaining point, a world of one); a sweep they end is ended at recovery.
#include <sys/wait.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/status_macros.h"
#include "server/engine/engine.h"
#include "server/supervise/worker_group.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

// Events read from the store at a time.
constexpr int kEventPage = 4096;

// How a rank's worker ends once it has reported its point: it exits 3 when the point ran out of
// memory, 0 otherwise (worker/train/run_worker.cc), classified as the supervisor classifies it.
ExitVerdict ExitAfterReport(bool out_of_memory, bool sent_oom) {
  WorkerRunFacts facts;
  const int code =
      out_of_memory ? vramlab::worker::kExitOutOfMemory : vramlab::worker::kExitSucceeded;
  facts.wait_status = W_EXITCODE(code, 0);
  facts.saw_final_report = true;
  facts.saw_oom = sent_oom;
  return ClassifyExit(facts);
}

// The plan from `experiment`'s stored events, read in pages.
absl::StatusOr<SweepResumePlan> PlanFromStore(Store& store, const Experiment& experiment) {
  StoredSweepEvents stored(SweepWorldSize(experiment.spec()));
  int64_t after = 0;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<vramlab::v1::ExperimentEvent> events,
                     store.ReadEvents(experiment.id(), after, kEventPage));
    for (const vramlab::v1::ExperimentEvent& event : events) stored.Add(event);
    if (static_cast<int>(events.size()) < kEventPage) break;
    after = events.back().sequence();
  }
  return stored.Plan(experiment.spec().sweep());
}

}  // namespace

SweepResumePlan Engine::ResumeSweepLocked(const Experiment& experiment, std::string* note) {
  absl::StatusOr<SweepResumePlan> plan = PlanFromStore(*store_, experiment);
  if (!plan.ok()) {
    *note = absl::StrCat("every sweep point runs again: its stored events cannot be read (",
                         plan.status().message(), ")");
    std::fprintf(stderr, "vramlabd: %s: %s\n", experiment.id().c_str(), note->c_str());
    return SweepResumePlan{};
  }
  if (!plan->taken.empty()) *note = ResumedPointsNote(static_cast<int>(plan->taken.size()));
  if (!note->empty() || !plan->next_runs_again.empty()) {
    std::fprintf(stderr, "vramlabd: %s: %s%s%s\n", experiment.id().c_str(), note->c_str(),
                 note->empty() || plan->next_runs_again.empty() ? "" : "; ",
                 plan->next_runs_again.c_str());
  }
  return *std::move(plan);
}

void Engine::TakeResumedPoints(Unfinished& unfinished) {
  if (unfinished.resumed.empty()) return;
  TakeStoredPoints(unfinished.resumed, *unfinished.sweep);
  // Each rank's latest out-of-memory answer, and the experiment's the latest point's that ran
  // out (its deciding rank's), as the points' ends keep them.
  for (const StoredSweepPoint& stored : unfinished.resumed) {
    for (int r = 0; r < static_cast<int>(unfinished.ranks.size()); ++r) {
      if (stored.ooms[r].has_value()) *unfinished.ranks[r].mutable_oom() = *stored.ooms[r];
    }
    if (stored.deciding_rank.has_value() && stored.ooms[*stored.deciding_rank].has_value()) {
      *unfinished.experiment.mutable_oom() = *stored.ooms[*stored.deciding_rank];
    }
  }
  // Every rank reported every point taken: each has ended a gang, the last one as its worker ends
  // after reporting. (A world of one has no ranks: its worker's end is the experiment's.)
  const StoredSweepPoint& last = unfinished.resumed.back();
  for (int r = 0; r < static_cast<int>(unfinished.ranks.size()); ++r) {
    const bool out_of_memory = last.reports[r].sweep_points(0).oom();
    const ExitVerdict end = ExitAfterReport(out_of_memory, last.ooms[r].has_value());
    unfinished.ranks[r].set_worker_exit_status(end.exit_status);
    unfinished.ranks[r].set_state_reason(end.state == Experiment::SUCCEEDED ? "" : end.reason);
    unfinished.rank_ended[r] = true;
  }
  RecordSweepResults(unfinished);
  unfinished.experiment.set_resumed_sweep_points(static_cast<int>(unfinished.resumed.size()));
}

void Engine::EndResumedSweepLocked(Unfinished& unfinished) {
  Experiment& experiment = unfinished.experiment;
  const int world_size = SweepWorldSize(experiment.spec());
  const bool parallel = IsParallelSweep(experiment.spec());
  // A parallel sweep's ranks on the slots of the run the restart interrupted; a one-process
  // sweep has none.
  unfinished.ranks.clear();
  for (int r = 0; parallel && r < world_size; ++r) {
    vramlab::v1::RankResult rank;
    rank.set_rank(r);
    if (r < experiment.slots_size()) rank.set_slot(experiment.slots(r));
    unfinished.ranks.push_back(rank);
  }
  unfinished.rank_ended.assign(unfinished.ranks.size(), false);
  unfinished.sweep.emplace(experiment.spec().sweep(), world_size);
  TakeResumedPoints(unfinished);
  ExitVerdict verdict;
  verdict.state = Experiment::SUCCEEDED;  // every LIST point fit, or the search has its answer
  const StoredSweepPoint& last = unfinished.resumed.back();
  if (unfinished.sweep->ended_out_of_memory() && last.deciding_rank.has_value()) {
    // A LIST that stopped at its last point taken, as that point's worker ends it: a one-process
    // sweep's worker exits out of memory after its report; a gang is ended by its deciding rank.
    const int deciding = *last.deciding_rank;
    verdict = ExitAfterReport(true, last.ooms[deciding].has_value());
    if (parallel) {
      verdict.reason = DecidingReason(deciding, verdict);
      verdict.deciding_rank = deciding;
    }
  }
  const std::string note = ResumedPointsNote(static_cast<int>(unfinished.resumed.size()));
  std::fprintf(stderr, "vramlabd: %s: every sweep point had ended before the restart (%s)\n",
               experiment.id().c_str(), note.c_str());
  EndExperimentLocked(experiment.id(), verdict);
}

}  // namespace vramlab::server
