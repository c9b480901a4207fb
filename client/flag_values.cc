#include "client/flag_values.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/suggest.h"

namespace vramlab::client {

absl::StatusOr<int32_t> ParseIntFlag(absl::string_view flag, absl::string_view text,
                                     int32_t min_value, int32_t max_value) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min_value || value > max_value) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected a whole number in [",
                                                   min_value, ", ", max_value, "], got \"", text,
                                                   "\""));
  }
  return static_cast<int32_t>(value);
}

absl::StatusOr<std::vector<int32_t>> ParseIntListFlag(absl::string_view flag,
                                                      absl::string_view text) {
  std::vector<int32_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &value) || value <= 0 ||
        value > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": expected comma-separated positive whole numbers, got \"", text, "\""));
    }
    values.push_back(static_cast<int32_t>(value));
  }
  return values;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text) {
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds) && seconds >= 0) return absl::Seconds(seconds);
  absl::Duration duration;
  if (absl::ParseDuration(text, &duration) && duration >= absl::ZeroDuration() &&
      duration != absl::InfiniteDuration()) {
    return duration;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": expected a duration such as 90s, 30m, 1h30m or plain seconds, got \"", text,
      "\""));
}

absl::StatusOr<double> ParseDoubleFlag(absl::string_view flag, absl::string_view text) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected a number, got \"", text, "\""));
  }
  return value;
}

absl::StatusOr<int> ParseChoiceFlag(absl::string_view flag, absl::string_view text,
                                    const std::vector<std::string>& choices) {
  const std::string lowered = absl::AsciiStrToLower(text);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == lowered) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected one of ",
                                                 absl::StrJoin(choices, "|"), ", got \"", text,
                                                 "\"", DidYouMean(lowered, choices)));
}

}  // namespace vramlab::client
