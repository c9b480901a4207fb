// Resuming a sweep that the daemon's restart requeued: which of its points had ended before the
// restart, read from the experiment's stored events, so that they are taken from the store instead
// of being run again (docs/PARALLEL.md, "Sweeps over ranks"; docs/DAEMON.md, "Sweeps resumed after
// a restart"). A parallel sweep's points ran as gangs of its world; a one-process sweep's as one
// worker that ran them all, or, once resumed, one worker per point (a world of one).
//
// The events are read in sequence order. Each launch of the experiment (its RUNNING state change)
// starts an attempt; within one attempt each point runs at most once. A point ended in an attempt
// when, for every rank of the world, the attempt holds that rank's `sweepPoint` event of it and
// its `report` whose one sweep point is the same (index, value, out of memory), every rank at the
// same value. In a world of one the report may be missing: a worker that runs the whole sweep
// sends one report at its end, not one per point, so the point's report is made from its result
// (the point's fields, and the device and parameter count of the attempt's `started` event), as a
// worker that ran that point alone would have sent it. Anything less runs the point again: a
// rank's events missing (the crash cut its gang, or they were never stored), two different
// results of one rank, a report that does not match its result.
//
// The points taken are the longest run of the sweep's own order (SweepOrder) whose every point
// ended, in some attempt, at the value the order asks for: replayed over the stored outcomes, the
// order then names the same next point an uninterrupted run would. An ended point is out of
// memory when any rank's result says so, decided by the lowest such rank (an uninterrupted gang
// is decided by the first rank the daemon reaps, which the events do not record).
#ifndef VRAMLAB_SERVER_ENGINE_SWEEP_RESUME_H_
#define VRAMLAB_SERVER_ENGINE_SWEEP_RESUME_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/sweep_order.h"
#include "server/engine/parallel_sweep.h"
#include "vramlab/v1/memory.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::server {

// A point of a sweep that ended before the restart, as its events show it.
struct StoredSweepPoint {
  spec_rules::SweepPoint point;
  bool out_of_memory = false;
  std::optional<int> deciding_rank;  // set when out_of_memory: the lowest rank that ran out
  // By rank: the rank's --sweep-point report of this point (in a world of one made from its
  // result when none was sent), and its out-of-memory answer when it sent one.
  std::vector<vramlab::v1::FinalReport> reports;
  std::vector<std::optional<vramlab::v1::OomReport>> ooms;
};

struct SweepResumePlan {
  // The points to take, in the order they ran (indices 0, 1, ...).
  std::vector<StoredSweepPoint> taken;
  // Whether the taken points end the sweep (nothing left to run).
  bool sweep_over = false;
  // Why the next point runs although some of its events were stored ("point 2 (value 256) runs
  // again: rank 1 has no result of it"); empty when none were.
  std::string next_runs_again;
};

// The results an experiment's stored events hold, per attempt and point. Feed it every event in
// sequence order, then ask for the plan.
class StoredSweepEvents {
 public:
  // `world_size`: the ranks of each point's gang, 1 for a one-process sweep (SweepWorldSize).
  explicit StoredSweepEvents(int world_size);

  // The experiment's next stored event. Events of ranks outside the world, and reports that do
  // not hold exactly one sweep point (a whole sweep's), are not a point's result and are passed
  // over.
  void Add(const vramlab::v1::ExperimentEvent& event);

  // The points of `sweep` to take from the store.
  SweepResumePlan Plan(const vramlab::v1::SweepSpec& sweep) const;

 private:
  struct RankResult {
    std::optional<vramlab::v1::SweepPointResult> point;
    std::optional<vramlab::v1::FinalReport> report;
    std::optional<vramlab::v1::OomReport> oom;
    std::string conflict;  // why this rank's events of the point cannot be used
  };
  struct Attempt {
    std::map<int32_t, std::vector<RankResult>> points;  // by sweep index, then by rank
    // The attempt's latest `started` event: a report made from a result (a world of one) takes
    // its device and parameter count.
    std::optional<vramlab::v1::WorkerStarted> started;
  };

  Attempt& Latest();
  RankResult* ResultOf(int rank, int32_t index);
  // "rank 2", or in a world of one "the worker".
  std::string Who(int rank) const;
  // The point at `index` and `value` as `attempt` ended it, or why it did not (`*why`).
  std::optional<StoredSweepPoint> Ended(const Attempt& attempt, int32_t index, int32_t value,
                                        std::string* why) const;

  const int world_size_;
  std::vector<Attempt> attempts_;
};

// Records `points` in `sweep` as if their gangs had just ended, in order. Precondition: `sweep`
// has recorded no point, and the points are a plan's for its spec and world.
void TakeStoredPoints(const std::vector<StoredSweepPoint>& points, ParallelSweep& sweep);

// "2 sweep points taken from before the restart": the words every view of a resumed sweep uses.
std::string ResumedPointsNote(int points);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_SWEEP_RESUME_H_
