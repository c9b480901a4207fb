#include "client/predicted_reserved.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>

namespace vramlab::client {
namespace {

using PhasePeak = vramlab::v1::MemoryEstimate::ReservedReplay::PhasePeak;

// phase -> step -> micro_step -> reserved bytes, as replayed.
class ReplayedPhases {
 public:
  explicit ReplayedPhases(const google::protobuf::RepeatedPtrField<PhasePeak>& peaks) {
    for (const PhasePeak& peak : peaks) {
      int64_t& bytes = reserved_[peak.phase()][peak.step()][peak.micro_step()];
      bytes = std::max(bytes, peak.reserved_bytes());
    }
  }

  // The replayed step at or before `step` (the first replayed one when `step` precedes them),
  // then its replayed micro-step at or before `micro_step` (likewise): the last replayed ones
  // stand for the steady state after them.
  std::optional<int64_t> Find(vramlab::v1::Phase phase, int32_t step, int32_t micro_step) const {
    const auto steps = reserved_.find(phase);
    if (steps == reserved_.end()) return std::nullopt;
    const auto& micro_steps = AtOrBefore(steps->second, step)->second;
    return AtOrBefore(micro_steps, micro_step)->second;
  }

 private:
  // The entry with the largest key <= `key`, else the first; `map` is not empty.
  template <typename Map>
  static typename Map::const_iterator AtOrBefore(const Map& map, int32_t key) {
    auto after = map.upper_bound(key);
    return after == map.begin() ? after : std::prev(after);
  }

  std::map<int, std::map<int32_t, std::map<int32_t, int64_t>>> reserved_;
};

}  // namespace

std::vector<PredictedReservedPoint> PredictedReservedLine(const vramlab::v1::Experiment& experiment,
                                                          const Timeline& timeline) {
  std::vector<PredictedReservedPoint> line;
  if (!experiment.has_prediction() || !experiment.prediction().has_replay()) return line;
  // The replay is of the point the prediction's top level describes: a LIST's first value. A
  // search's first point is wherever the search starts (the predicted boundary), not that one.
  if (experiment.spec().has_sweep() &&
      experiment.spec().sweep().mode() == vramlab::v1::SEARCH_MAX) {
    return line;
  }
  const ReplayedPhases replayed(experiment.prediction().replay().phase_peaks());
  std::vector<const PhaseBand*> bands;
  for (const PhaseBand& band : timeline.bands) {
    if (band.sweep_index == 0) bands.push_back(&band);
  }
  std::stable_sort(bands.begin(), bands.end(), [](const PhaseBand* a, const PhaseBand* b) {
    return a->start_seconds < b->start_seconds;
  });
  std::optional<int64_t> previous;
  for (const PhaseBand* band : bands) {
    std::optional<int64_t> bytes = replayed.Find(band->phase, band->step, band->micro_step);
    if (!bytes.has_value()) bytes = previous;
    if (!bytes.has_value()) continue;
    line.push_back({band->start_seconds, *bytes});
    line.push_back({band->end_seconds, *bytes});
    previous = bytes;
  }
  return line;
}

}  // namespace vramlab::client
