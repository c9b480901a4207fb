#include "common/spec/sweep_order.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace vramlab::spec_rules {
namespace {

std::optional<int32_t> ParseCount(const std::string& text) {
  if (text.empty() || text.size() > 10 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (value > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(value);
}

}  // namespace

std::vector<int32_t> SearchCandidates(int64_t search_min, int64_t search_max, int64_t granularity) {
  std::vector<int32_t> candidates;
  for (int64_t value = (search_min + granularity - 1) / granularity * granularity;
       value <= search_max; value += granularity) {
    candidates.push_back(static_cast<int32_t>(value));
  }
  return candidates;
}

SweepOrder::SweepOrder(bool search, std::vector<int32_t> values)
    : search_(search),
      values_(std::move(values)),
      fails_(static_cast<int64_t>(values_.size())),
      measured_fails_(fails_),
      above_(fails_) {}

SweepOrder SweepOrder::List(std::vector<int32_t> values) {
  return SweepOrder(false, std::move(values));
}

SweepOrder SweepOrder::SearchIndices(int64_t candidates, int64_t predicted, int64_t above) {
  SweepOrder order(true, {});
  order.fails_ = order.measured_fails_ = candidates;
  order.predicted_ = predicted;
  order.above_ = std::max(above, predicted + 1);
  order.Settle();
  return order;
}

SweepOrder SweepOrder::SearchMax(int64_t search_min, int64_t search_max, int64_t granularity,
                                 std::optional<int32_t> predicted_largest_fit,
                                 std::optional<int32_t> predicted_not_ruled_out) {
  SweepOrder order(true, SearchCandidates(search_min, search_max, granularity));
  if (predicted_largest_fit.has_value()) {
    const std::vector<int32_t>& c = order.values_;
    order.predicted_ = std::upper_bound(c.begin(), c.end(), *predicted_largest_fit) - c.begin() - 1;
    order.above_ = order.predicted_ + 1;
    if (predicted_not_ruled_out.has_value()) {
      order.above_ = std::max<int64_t>(
          order.above_, std::upper_bound(c.begin(), c.end(), *predicted_not_ruled_out) - c.begin());
    }
    order.Settle();
  }
  return order;
}

bool SweepOrder::HasProbe() const {
  return phase_ == Phase::kConfirmFit || phase_ == Phase::kConfirmFail || fails_ - fits_ > 1;
}

int64_t SweepOrder::ProbeIndex() const {
  switch (phase_) {
    case Phase::kConfirmFit:
      return fits_;
    case Phase::kConfirmFail:
      return fails_;
    case Phase::kWidenDown:
      return std::max(fails_ - step_, fits_ + 1);
    case Phase::kWidenUp:
      return std::min(fits_ + step_, fails_ - 1);
    case Phase::kBisect:
      break;
  }
  return fits_ + (fails_ - fits_) / 2;
}

void SweepOrder::Settle() {
  if (phase_ != Phase::kBisect) return;
  while (fails_ - fits_ > 1) {
    const int64_t probe = ProbeIndex();
    if (probe <= predicted_) {
      fits_ = probe;
    } else if (probe >= above_) {
      fails_ = probe;
    } else {
      return;  // inside the band: it runs
    }
  }
  // Settled: the deciding candidates that were only predicted run, the fit first.
  if (fits_ > measured_fits_) {
    phase_ = Phase::kConfirmFit;
  } else if (fails_ < measured_fails_) {
    phase_ = Phase::kConfirmFail;
  }
}

void SweepOrder::DropPredicted() {
  predicted_ = -1;
  above_ = measured_fails_;  // above every probe from here on
  fits_ = measured_fits_;
  fails_ = measured_fails_;
}

void SweepOrder::RecordProbe(bool out_of_memory) {
  const int64_t probe = ProbeIndex();
  if (out_of_memory) {
    measured_fails_ = std::min(measured_fails_, probe);
  } else {
    measured_fits_ = std::max(measured_fits_, probe);
  }
  switch (phase_) {
    case Phase::kBisect:
      (out_of_memory ? fails_ : fits_) = probe;
      break;
    case Phase::kConfirmFit:
    case Phase::kConfirmFail:
      phase_ = Phase::kBisect;
      // Predicted to fit and ran out, or predicted not to and fitted: the prediction is wrong,
      // so the search widens from here on measured points alone.
      if (out_of_memory == (probe == fits_)) {
        DropPredicted();
        phase_ = out_of_memory ? Phase::kWidenDown : Phase::kWidenUp;
        step_ = 1;
      }
      break;
    case Phase::kWidenDown:
    case Phase::kWidenUp:
      (out_of_memory ? fails_ : fits_) = probe;
      // A point on the far side of the boundary ends the widening; the rest is bisection.
      if (out_of_memory == (phase_ == Phase::kWidenUp)) {
        phase_ = Phase::kBisect;
      } else {
        step_ *= 2;
      }
      break;
  }
  Settle();
}

std::optional<int32_t> SweepOrder::Next() const {
  if (search_) {
    if (!HasProbe()) return std::nullopt;
    return values_[static_cast<size_t>(ProbeIndex())];
  }
  if (stopped_ || static_cast<size_t>(recorded_) >= values_.size()) return std::nullopt;
  return values_[static_cast<size_t>(recorded_)];
}

void SweepOrder::Record(bool out_of_memory) {
  ++recorded_;
  if (search_) {
    RecordProbe(out_of_memory);
  } else {
    stopped_ = out_of_memory;
  }
}

bool SweepOrder::MayRun(int32_t index, int32_t value) const {
  if (index < 0 || static_cast<size_t>(index) >= values_.size()) return false;
  if (!search_) return values_[static_cast<size_t>(index)] == value;
  return std::binary_search(values_.begin(), values_.end(), value);
}

SweepOrder SweepOrderOf(const plain::SweepSpec& sweep) {
  if (sweep.mode != plain::SweepMode::kSearchMax) return SweepOrder::List(sweep.values);
  std::optional<int32_t> start;
  std::optional<int32_t> not_ruled_out;
  if (sweep.has_predicted_largest_fit && !sweep.plain_bisection) {
    start = sweep.predicted_largest_fit;
    if (sweep.has_predicted_not_ruled_out) not_ruled_out = sweep.predicted_not_ruled_out;
  }
  return SweepOrder::SearchMax(sweep.search_min, sweep.search_max,
                               std::max(1, sweep.search_granularity), start, not_ruled_out);
}

int32_t BisectionPointsAtMost(int64_t unknown) {
  int32_t points = 0;
  for (int64_t settled = 0; settled < unknown; settled = 2 * settled + 1) ++points;
  return points;
}

int32_t SearchPointsAtMost(int64_t candidates, int64_t predicted_largest_fit,
                           int64_t predicted_not_ruled_out) {
  const int64_t first = std::max<int64_t>(predicted_largest_fit, -1);
  const int64_t last = std::min(std::max(predicted_not_ruled_out, first), candidates - 1);
  int32_t most = 0;
  for (int64_t largest_fit = first; largest_fit <= last; ++largest_fit) {
    SweepOrder order = SweepOrder::SearchIndices(candidates, first, last + 1);
    int32_t points = 0;
    for (; order.HasProbe(); ++points) order.RecordProbe(order.ProbeIndex() > largest_fit);
    most = std::max(most, points);
  }
  return most;
}

int32_t PlainBisectionPoints(int32_t candidates, int32_t largest_fit) {
  SweepOrder order = SweepOrder::SearchMax(1, candidates, 1);
  while (const std::optional<int32_t> value = order.Next()) {
    // Candidate k (from 0) is the value k + 1.
    order.Record(*value - 1 > largest_fit);
  }
  return order.next_index();
}

std::string FormatSweepPoint(const SweepPoint& point) {
  return std::to_string(point.index) + ":" + std::to_string(point.value);
}

std::optional<SweepPoint> ParseSweepPoint(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::optional<int32_t> index = ParseCount(text.substr(0, colon));
  const std::optional<int32_t> value = ParseCount(text.substr(colon + 1));
  if (!index.has_value() || !value.has_value()) return std::nullopt;
  return SweepPoint{*index, *value};
}

}  // namespace vramlab::spec_rules
