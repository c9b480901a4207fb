// Reading a value back from the Prometheus text exposition format, for tests that scrape the
// exporter directly. Header-only: included by server/metrics' unit test and tests/metrics.
#ifndef VRAMLAB_TESTS_METRICS_EXPOSITION_TEXT_H_
#define VRAMLAB_TESTS_METRICS_EXPOSITION_TEXT_H_

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace vramlab::testing {

// The value of the series whose line starts with `series` ("name{labels}" exactly as the exporter
// writes it, or a bare name), or nullopt when no such line exists.
inline std::optional<double> SeriesValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::nullopt;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_METRICS_EXPOSITION_TEXT_H_
