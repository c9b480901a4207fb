// The order in which a sweep's points run and the rule that ends it, in one place for the two
// that run sweeps: the worker, which runs a one-process sweep's points itself
// (worker/train/experiment_runner.cc), and the daemon, which runs each point of a parallel sweep
// as its own gang of ranks (server/engine/parallel_sweep.h). Points are numbered 0, 1, ... in the
// order they run: the sweep_index of their events.
//
//  - LIST: the values in order, until the first point that runs out of memory (the lab report's
//    torture test); the sweep's answer is then out of memory.
//  - SEARCH_MAX: the largest candidate (SearchCandidates) that fits, by bisection. Without a
//    start, every probe runs. From a predicted start (the daemon's estimate:
//    SweepSpec.predicted_largest_fit, and where the estimate leaves a band TIGHT,
//    SweepSpec.predicted_not_ruled_out), the bisection walks the same path, but a probe the
//    prediction decides (at or below the predicted largest fit: fits; above the band: does not)
//    is taken as predicted instead of run; only the band's probes run. Once the bisection has
//    settled, each of its two deciding candidates (the largest that fits, the next one up) that
//    was only predicted runs; with an exact prediction those two are the whole search. Where one
//    of them contradicts the prediction, every predicted outcome is dropped: the search widens
//    from it in steps of 1, 2, 4, ... candidates until a point agrees, then bisects what lies
//    between on measured points alone.
//    So wherever the prediction holds outside its band, the search runs the plain bisection's
//    path and ends at its answer, even where fitting is not monotone in the value inside the
//    band; where it does not hold, the answer is the plain bisection's for memory that grows with
//    the value. Out-of-memory points are expected on the way; the answer is never out of memory.
//
// A point of a sweep run on its own (a parallel sweep's gang) is named to the worker with
// --sweep-point INDEX:VALUE (docs/PARALLEL.md, "Launch contract").
#ifndef VRAMLAB_COMMON_SPEC_SWEEP_ORDER_H_
#define VRAMLAB_COMMON_SPEC_SWEEP_ORDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::spec_rules {

// The SEARCH_MAX candidates: the multiples of `granularity` (>= 1) in [search_min, search_max],
// ascending.
std::vector<int32_t> SearchCandidates(int64_t search_min, int64_t search_max, int64_t granularity);

class SweepOrder {
 public:
  // LIST over `values`, in their order.
  static SweepOrder List(std::vector<int32_t> values);
  // SEARCH_MAX over SearchCandidates(search_min, search_max, granularity), by plain bisection,
  // or, with `predicted_largest_fit`, with the candidates <= it predicted to fit (none when it is
  // below every candidate, e.g. 0: predicted that none fits) and those above it predicted not
  // to; with `predicted_not_ruled_out` too, only those above that are predicted not to fit.
  static SweepOrder SearchMax(int64_t search_min, int64_t search_max, int64_t granularity,
                              std::optional<int32_t> predicted_largest_fit = std::nullopt,
                              std::optional<int32_t> predicted_not_ruled_out = std::nullopt);

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
  friend int32_t SearchPointsAtMost(int64_t, int64_t, int64_t);

  // Where a SEARCH_MAX is: bisecting (from a prediction, taking the predicted probes as
  // predicted), running one of the settled bisection's two deciding candidates that was only
  // predicted, or, after a contradiction, widening below or above it.
  enum class Phase { kBisect, kConfirmFit, kConfirmFail, kWidenDown, kWidenUp };

  SweepOrder(bool search, std::vector<int32_t> values);
  // A SEARCH_MAX over `candidates` candidates, known by index only (values_ stays empty): what
  // SearchPointsAtMost runs.
  static SweepOrder SearchIndices(int64_t candidates, int64_t predicted, int64_t above);
  // SEARCH_MAX: whether a point is still to run, and the candidate index of the next one.
  bool HasProbe() const;
  int64_t ProbeIndex() const;
  // SEARCH_MAX: records the outcome of the point at ProbeIndex(), then takes the probes the
  // prediction decides until one must run (Settle).
  void RecordProbe(bool out_of_memory);
  void Settle();
  // After a contradiction: drops every outcome only predicted; fits_ and fails_ become the
  // nearest measured ones.
  void DropPredicted();

  bool search_;
  std::vector<int32_t> values_;  // LIST: the values; SEARCH_MAX: the candidates
  int32_t recorded_ = 0;
  bool stopped_ = false;  // LIST: a point ran out of memory
  // SEARCH_MAX. Invariant: every candidate below index fits_ + 1 fits and every one from fails_
  // on does not, measured or predicted; the bisection's next probe is the middle of
  // (fits_, fails_). measured_fits_ <= fits_ and measured_fails_ >= fails_ are the same bounds
  // from measured points alone.
  int64_t fits_ = -1;
  int64_t fails_ = 0;
  int64_t measured_fits_ = -1;
  int64_t measured_fails_ = 0;
  Phase phase_ = Phase::kBisect;
  // From a prediction: candidates at index <= predicted_ are predicted to fit, those at index
  // >= above_ not to; without one, predicted_ is -1 and above_ the number of candidates, and
  // every probe runs.
  int64_t predicted_ = -1;
  int64_t above_ = 0;
  int64_t step_ = 1;  // kWidenDown/kWidenUp: the distance of the next point
};

// The order a spec's sweep runs in, the same for the worker (its one-process sweep) and the
// daemon (a parallel sweep's gangs, a resumed sweep, the search's saving): SEARCH_MAX over the
// spec's range (a granularity of 0 is 1), from predicted_largest_fit (and
// predicted_not_ruled_out) where the daemon set it and plain_bisection is false; LIST over the
// values in their order.
SweepOrder SweepOrderOf(const plain::SweepSpec& sweep);

// The most points a bisection runs to settle `unknown` candidates: ceil(log2(unknown + 1)).
int32_t BisectionPointsAtMost(int64_t unknown);

// The most points a search over `candidates` candidates runs from a prediction that the largest
// candidate that fits is at index `predicted_largest_fit` (-1: none), or, with a band, at most
// `predicted_not_ruled_out` (>= predicted_largest_fit), when the prediction holds: memory growing
// with the value and the largest fit anywhere in the band.
int32_t SearchPointsAtMost(int64_t candidates, int64_t predicted_largest_fit,
                           int64_t predicted_not_ruled_out);

// The points a plain bisection over `candidates` candidates runs when the largest that fits is
// the one at `largest_fit` (-1: none fits), memory growing with the value: what a search from a
// prediction is compared with.
int32_t PlainBisectionPoints(int32_t candidates, int32_t largest_fit);

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
