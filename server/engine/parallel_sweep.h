// The sweep of a parallel experiment (spec.parallel.world_size >= 2 with a sweep): the Engine runs
// each point as its own gang of rank processes, in the sweep's order (common/spec/sweep_order.h),
// every rank told its point with --sweep-point INDEX:VALUE. Within one gang a rank's
// out-of-memory error cannot be recovered (its peers wait in a collective), so a point is one
// gang's whole life. A one-process sweep that resumes after a restart with points taken from the
// store (sweep_resume.h) runs the same way as a world of one: one worker per remaining point.
// This class is the plan and the bookkeeping, no processes: which point runs next, what each rank
// reported of each point, and the results as a one-process sweep reports them (docs/PARALLEL.md,
// "Sweeps over ranks").
//
// The rule after a point is the one-process sweep's: a point whose gang ended out of memory (any
// rank) is out of memory; LIST stops there and the experiment's answer is OOM; SEARCH_MAX bisects
// on and ends SUCCEEDED. A gang that ends otherwise (failed, cancelled, interrupted) ends the
// experiment with its verdict; the Engine decides that, not this class.
//
// Not thread-safe: the Engine holds it under its lock.
#ifndef VRAMLAB_SERVER_ENGINE_PARALLEL_SWEEP_H_
#define VRAMLAB_SERVER_ENGINE_PARALLEL_SWEEP_H_

#include <optional>
#include <vector>

#include "common/spec/sweep_order.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// Whether `spec` has a sweep: LIST values or SEARCH_MAX, in one process or over ranks.
bool HasSweep(const vramlab::v1::ExperimentSpec& spec);
// Whether the Engine runs `spec` as a parallel sweep (one gang per point).
bool IsParallelSweep(const vramlab::v1::ExperimentSpec& spec);
// The ranks of each point's gang when the Engine runs `spec`'s sweep one gang per point:
// spec.parallel.world_size, 1 for a one-process sweep.
int SweepWorldSize(const vramlab::v1::ExperimentSpec& spec);

// The sweep's points as the worker runs them (spec_rules::SweepOrderOf of the same fields).
spec_rules::SweepOrder SweepOrderOf(const vramlab::v1::SweepSpec& sweep);

// Reports of single points (each with its one sweep point), in the order the points ran, merged
// as the worker merges a sweep's points into its final report: every point in `sweep_points`;
// the largest value that fit in `largest_fitting_value` and its point's anatomy, attention
// backend, step time, throughput, MFU and final loss (the last point's when none fit); the device
// and model fields of the latest report.
vramlab::v1::FinalReport MergePointReports(const std::vector<vramlab::v1::FinalReport>& reports);

class ParallelSweep {
 public:
  ParallelSweep(const vramlab::v1::SweepSpec& sweep, int world_size);

  // The point to run next: its index (the events' sweep_index) and value; nullopt once the
  // sweep is over.
  std::optional<spec_rules::SweepPoint> Next() const;
  // A rank's final report of the running point (one sweep point: the worker's --sweep-point
  // report). Reports of a rank outside the world are ignored.
  void OnReport(int rank, const vramlab::v1::FinalReport& report);
  // The running point's gang ended with every rank done: `out_of_memory` when its verdict was
  // OOM, decided by `deciding_rank`. Precondition: Next() had a value.
  void EndPoint(bool out_of_memory, std::optional<int> deciding_rank);
  // A LIST sweep that stopped at a point out of memory.
  bool ended_out_of_memory() const { return order_.ended_out_of_memory(); }
  int points_ended() const { return static_cast<int>(ended_.size()); }

  // The experiment's report over the ended points: each point's result is rank 0's, or, for a
  // point out of memory, that of the rank that decided it (the one that ran out), marked out of
  // memory; a point neither reported is {index, value, oom}. Nullopt before any point ended.
  std::optional<vramlab::v1::FinalReport> ExperimentReport() const;
  // Rank `rank`'s report over the ended points it reported; nullopt when it reported none.
  std::optional<vramlab::v1::FinalReport> RankReport(int rank) const;

 private:
  struct EndedPoint {
    spec_rules::SweepPoint point;
    bool out_of_memory = false;
    std::optional<int> deciding_rank;
    std::vector<std::optional<vramlab::v1::FinalReport>> reports;  // by rank
  };

  spec_rules::SweepOrder order_;
  int world_size_;
  // The running point's reports, by rank.
  std::vector<std::optional<vramlab::v1::FinalReport>> running_;
  std::vector<EndedPoint> ended_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_PARALLEL_SWEEP_H_
