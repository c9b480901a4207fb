#include "server/supervise/worker_group.h"

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

// Lower decides first among ranks that ended in the same pass (see the header).
int CausePrecedence(const ExitVerdict& verdict, const WorkerRunFacts& facts) {
  if (verdict.state == Experiment::OOM) return 0;
  if (facts.timed_out) return 2;
  if (verdict.exit_status < 0) return 1;
  if (verdict.exit_status == 1) return 4;
  return 3;
}

}  // namespace

std::string DecidingReason(int rank, const ExitVerdict& verdict) {
  if (verdict.state == Experiment::OOM) return absl::StrCat("rank ", rank, " ran out of memory");
  return absl::StrCat("rank ", rank, ": ", verdict.reason);
}

WorkerGroup::WorkerGroup(std::string experiment_id,
                         std::vector<std::unique_ptr<RunningWorker>> ranks)
    : experiment_id_(std::move(experiment_id)),
      ranks_(std::move(ranks)),
      ended_(ranks_.size()),
      stopped_by_group_(ranks_.size(), false) {}

void WorkerGroup::RequestStop(RunningWorker::StopReason reason, SteadyTime now) {
  if (!deciding_rank_.has_value()) stopped_by_daemon_ = true;
  for (auto& rank : ranks_) rank->RequestStop(reason, now);
}

void WorkerGroup::Advance(SteadyTime now, const RankEndCallback& on_end) {
  std::vector<int> finished;
  for (int r = 0; r < size(); ++r) {
    if (ended_[r].has_value()) continue;
    RunningWorker& rank = *ranks_[r];
    rank.CheckTimers(now);
    rank.TryReap(now);
    if (rank.Finished(now)) finished.push_back(r);
  }
  if (!finished.empty()) EndRanks(finished, now, on_end);
}

void WorkerGroup::EndRanks(const std::vector<int>& finished, SteadyTime now,
                           const RankEndCallback& on_end) {
  std::vector<ExitVerdict> verdicts;
  for (int r : finished) verdicts.push_back(ClassifyExit(ranks_[r]->facts()));
  if (size() >= 2 && !deciding_rank_.has_value() && !stopped_by_daemon_) {
    std::optional<size_t> cause;
    int best = 0;
    for (size_t i = 0; i < finished.size(); ++i) {
      if (verdicts[i].state == Experiment::SUCCEEDED) continue;
      int precedence = CausePrecedence(verdicts[i], ranks_[finished[i]]->facts());
      if (!cause.has_value() || precedence < best) {
        cause = i;
        best = precedence;
      }
    }
    if (cause.has_value()) {
      deciding_rank_ = finished[*cause];
      deciding_reason_ = DecidingReason(*deciding_rank_, verdicts[*cause]);
      for (int r = 0; r < size(); ++r) {
        bool ending_now = false;
        for (int f : finished) ending_now = ending_now || f == r;
        if (ended_[r].has_value() || ending_now) continue;
        stopped_by_group_[r] = true;
        ranks_[r]->RequestStop(RunningWorker::StopReason::kPeerEnded, now);
      }
    }
  }
  for (size_t i = 0; i < finished.size(); ++i) {
    const int r = finished[i];
    ended_[r] = verdicts[i];
    RankEnd end{r, verdicts[i], ""};
    if (verdicts[i].state != Experiment::SUCCEEDED) {
      end.state_reason =
          stopped_by_group_[r] ? absl::StrCat("stopped: ", deciding_reason_) : verdicts[i].reason;
    }
    on_end(end);
  }
}

bool WorkerGroup::Finished() const {
  for (const auto& ended : ended_) {
    if (!ended.has_value()) return false;
  }
  return true;
}

ExitVerdict WorkerGroup::Verdict() const {
  if (size() == 1) return ended_[0].value_or(ExitVerdict{});
  if (deciding_rank_.has_value()) {
    ExitVerdict verdict = ended_[*deciding_rank_].value_or(ExitVerdict{});
    verdict.reason = deciding_reason_;
    verdict.deciding_rank = deciding_rank_;
    return verdict;
  }
  // Nothing decided it: a success of every rank, or the daemon's stop (the first rank's answer
  // that is not a success, e.g. CANCELLED).
  for (const auto& ended : ended_) {
    if (ended.has_value() && ended->state != Experiment::SUCCEEDED) return *ended;
  }
  return ended_[0].value_or(ExitVerdict{});
}

void WorkerGroup::KillAndReap(const RankEndCallback& on_end) {
  std::vector<int> pending;
  for (int r = 0; r < size(); ++r) {
    if (ended_[r].has_value()) continue;
    ranks_[r]->KillAndReap();
    pending.push_back(r);
  }
  stopped_by_daemon_ = true;
  if (!pending.empty()) EndRanks(pending, std::chrono::steady_clock::now(), on_end);
}

ExitVerdict WorkerGroup::SpawnFailed(int size, int failed_rank, const WorkerRunFacts& facts,
                                     const RankEndCallback& on_end) {
  ExitVerdict verdict = ClassifyExit(facts);
  if (size < 2) return verdict;
  const std::string reason = DecidingReason(failed_rank, verdict);
  for (int r = 0; r < size; ++r) {
    if (r == failed_rank) {
      on_end(RankEnd{r, verdict, verdict.reason});
      continue;
    }
    ExitVerdict other;
    other.state = Experiment::FAILED;
    on_end(
        RankEnd{r, other, absl::StrCat(r < failed_rank ? "stopped: " : "not started: ", reason)});
  }
  verdict.reason = reason;
  verdict.deciding_rank = failed_rank;
  return verdict;
}

}  // namespace vramlab::server
