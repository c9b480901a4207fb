// The order in which a sweep's points run and the rule that ends it, in one place for the two
// that run sweeps: the worker, which runs a one-process sweep's points itself
// (worker/train/experiment_runner.cc), and the daemon, which runs each point of a parallel sweep
// as its own gang of ranks (server/engine/parallel_sweep.h). Points are numbered 0, 1, ... in the
// order they run: the sweep_index of their events.
//
//  - LIST: the values in order, until the first point that runs out of memory (the lab report's
//    torture test); the sweep's answer is then out of memory.
//  - SEARCH_MAX: bisection over the candidates (SearchCandidates) for the largest that fits,
//    assuming memory grows with the value. Out-of-memory points are expected on the way; the
//    answer is never out of memory.
//
// A point of a sweep run on its own (a parallel sweep's gang) is named to the worker with
// --sweep-point INDEX:VALUE (docs/PARALLEL.md, "Launch contract").
#ifndef VRAMLAB_COMMON_SPEC_SWEEP_ORDER_H_
#define VRAMLAB_COMMON_SPEC_SWEEP_ORDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vramlab::spec_rules {

// The SEARCH_MAX candidates: the multiples of `granularity` (>= 1) in [search_min, search_max],
// ascending.
std::vector<int32_t> SearchCandidates(int64_t search_min, int64_t search_max, int64_t granularity);

class SweepOrder {
 public:
  // LIST over `values`, in their order.
  static SweepOrder List(std::vector<int32_t> values);
  // SEARCH_MAX over SearchCandidates(search_min, search_max, granularity).
  static SweepOrder SearchMax(int64_t search_min, int64_t search_max, int64_t granularity);

  // The value of the next point to run; nullopt once the sweep is over.
  std::optional<int32_t> Next() const;
  // The index the next point runs with: the number of points recorded so far.
  int32_t next_index() const { return recorded_; }
  // Records how the point Next() named ended. Precondition: Next() has a value.
  void Record(bool out_of_memory);
  // A LIST sweep that ended at a point out of memory: the sweep's answer is out of memory.
  bool ended_out_of_memory() const { return !search_ && stopped_; }
  // Whether point `index` of this sweep may run at `value`: LIST: values[index] is `value`;
  // SEARCH_MAX: `value` is a candidate and `index` below their number (which candidate a later
  // point probes depends on the earlier points' outcomes).
  bool MayRun(int32_t index, int32_t value) const;

 private:
  SweepOrder(bool search, std::vector<int32_t> values);

  bool search_;
  std::vector<int32_t> values_;  // LIST: the values; SEARCH_MAX: the candidates
  int32_t recorded_ = 0;
  bool stopped_ = false;  // LIST: a point ran out of memory
  // SEARCH_MAX. Invariant: every candidate below index fits_ + 1 fits and every one from fails_
  // on does not; the next probe is the middle of (fits_, fails_).
  int64_t fits_ = -1;
  int64_t fails_ = 0;
};

// One point of a sweep, as --sweep-point names it.
struct SweepPoint {
  int32_t index = 0;
  int32_t value = 0;
};

inline constexpr const char* kSweepPointFlag = "--sweep-point";
// "INDEX:VALUE".
std::string FormatSweepPoint(const SweepPoint& point);
// Parses "INDEX:VALUE" (both non-negative decimal numbers that fit 32 bits); nullopt otherwise.
std::optional<SweepPoint> ParseSweepPoint(const std::string& text);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_SWEEP_ORDER_H_
