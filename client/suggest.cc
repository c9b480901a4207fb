#include "client/suggest.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vramlab::client {

int EditDistance(absl::string_view a, absl::string_view b) {
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> ClosestMatch(absl::string_view word,
                                        const std::vector<std::string>& candidates) {
  if (word.size() < 2 ||
      std::find(candidates.begin(), candidates.end(), word) != candidates.end()) {
    return std::nullopt;
  }
  const int max_distance = word.size() <= 3 ? 1 : 2;
  const std::string* best = nullptr;
  int best_distance = max_distance + 1;
  for (const std::string& candidate : candidates) {
    const int distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best = &candidate;
      best_distance = distance;
    }
  }
  if (best != nullptr) return *best;
  const std::string* prefixed = nullptr;
  for (const std::string& candidate : candidates) {
    if (!absl::StartsWith(candidate, word)) continue;
    if (prefixed != nullptr) return std::nullopt;  // ambiguous
    prefixed = &candidate;
  }
  if (prefixed == nullptr) return std::nullopt;
  return *prefixed;
}

std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates,
                       absl::string_view prefix) {
  const auto match = ClosestMatch(word, candidates);
  if (!match.has_value()) return "";
  return absl::StrCat(" (did you mean \"", prefix, *match, "\"?)");
}

}  // namespace vramlab::client
