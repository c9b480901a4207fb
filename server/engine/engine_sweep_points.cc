// The Engine's side of a sweep run one gang per point (parallel_sweep.h: a parallel sweep, or a
// resumed one-process sweep as a world of one): when one point's gang has ended, its results are
// recorded and the next point's gang starts on the same slots, or the experiment's final verdict
// is decided.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/net/loopback_port.h"
#include "server/engine/engine.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

void Engine::RecordSweepResults(Unfinished& unfinished) {
  const ParallelSweep& sweep = *unfinished.sweep;
  if (std::optional<vramlab::v1::FinalReport> report = sweep.ExperimentReport()) {
    *unfinished.experiment.mutable_report() = *std::move(report);
  }
  for (int r = 0; r < static_cast<int>(unfinished.ranks.size()); ++r) {
    if (std::optional<vramlab::v1::FinalReport> report = sweep.RankReport(r)) {
      *unfinished.ranks[r].mutable_report() = *std::move(report);
    }
  }
  RecordEndedRanks(unfinished);
}

std::optional<ExitVerdict> Engine::EndSweepPointLocked(Unfinished& unfinished,
                                                       const ExitVerdict& verdict) {
  ParallelSweep& sweep = *unfinished.sweep;
  Experiment& experiment = unfinished.experiment;
  const spec_rules::SweepPoint point = *sweep.Next();
  std::fprintf(stderr, "vramlabd: %s point %d ended %s%s%s\n", experiment.id().c_str(), point.index,
               Experiment::State_Name(verdict.state).c_str(), verdict.reason.empty() ? "" : ": ",
               verdict.reason.c_str());
  // Failed, cancelled or interrupted: the experiment ends as a one-point run would.
  if (verdict.state != Experiment::SUCCEEDED && verdict.state != Experiment::OOM) return verdict;

  const bool out_of_memory = verdict.state == Experiment::OOM;
  sweep.EndPoint(out_of_memory, verdict.deciding_rank);
  RecordSweepResults(unfinished);
  // As a one-process sweep's: the latest out-of-memory answer (of the rank that decided it).
  if (out_of_memory && verdict.deciding_rank.has_value() && *verdict.deciding_rank >= 0 &&
      *verdict.deciding_rank < static_cast<int>(unfinished.ranks.size()) &&
      unfinished.ranks[*verdict.deciding_rank].has_oom()) {
    *experiment.mutable_oom() = unfinished.ranks[*verdict.deciding_rank].oom();
  }

  const std::optional<spec_rules::SweepPoint> next = sweep.Next();
  if (!next.has_value()) {
    if (sweep.ended_out_of_memory()) return verdict;  // LIST: stopped at its first OOM
    ExitVerdict succeeded;  // every LIST point fit, or the SEARCH_MAX answer was found
    succeeded.state = Experiment::SUCCEEDED;
    return succeeded;
  }
  if (unfinished.cancel_requested) {
    WorkerRunFacts facts;
    facts.cancelled = true;
    return ClassifyExit(facts);
  }
  int rendezvous_port = 0;  // a world of one has no rendezvous
  if (unfinished.slots.size() >= 2) {
    std::string error;
    rendezvous_port = net::PickFreeLoopbackPort(&error);
    if (rendezvous_port == 0) {
      ExitVerdict failed;
      failed.reason = absl::StrCat("sweep point ", next->index,
                                   " could not be started: no rendezvous port (", error, ")");
      return failed;
    }
  }
  SpawnGangLocked(unfinished, rendezvous_port);
  return std::nullopt;
}

}  // namespace vramlab::server
