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
    : search_(search), values_(std::move(values)), fails_(static_cast<int64_t>(values_.size())) {}

SweepOrder SweepOrder::List(std::vector<int32_t> values) {
  return SweepOrder(false, std::move(values));
}

SweepOrder SweepOrder::SearchMax(int64_t search_min, int64_t search_max, int64_t granularity) {
  return SweepOrder(true, SearchCandidates(search_min, search_max, granularity));
}

std::optional<int32_t> SweepOrder::Next() const {
  if (search_) {
    if (fails_ - fits_ <= 1) return std::nullopt;
    return values_[static_cast<size_t>(fits_ + (fails_ - fits_) / 2)];
  }
  if (stopped_ || static_cast<size_t>(recorded_) >= values_.size()) return std::nullopt;
  return values_[static_cast<size_t>(recorded_)];
}

void SweepOrder::Record(bool out_of_memory) {
  ++recorded_;
  if (!search_) {
    stopped_ = out_of_memory;
    return;
  }
  const int64_t middle = fits_ + (fails_ - fits_) / 2;
  if (out_of_memory) {
    fails_ = middle;
  } else {
    fits_ = middle;
  }
}

bool SweepOrder::MayRun(int32_t index, int32_t value) const {
  if (index < 0 || static_cast<size_t>(index) >= values_.size()) return false;
  if (!search_) return values_[static_cast<size_t>(index)] == value;
  return std::binary_search(values_.begin(), values_.end(), value);
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
