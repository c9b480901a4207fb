// Typed readers of flag values shared by the subcommands. Every error is INVALID_ARGUMENT and
// names the flag, so the user knows which argument to fix.
#ifndef VRAMLAB_CLIENT_FLAG_VALUES_H_
#define VRAMLAB_CLIENT_FLAG_VALUES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace vramlab::client {

// A whole number in [min_value, max_value].
absl::StatusOr<int32_t> ParseIntFlag(absl::string_view flag, absl::string_view text,
                                     int32_t min_value, int32_t max_value);

// A comma-separated list of positive integers ("512,1024,2048").
absl::StatusOr<std::vector<int32_t>> ParseIntListFlag(absl::string_view flag,
                                                      absl::string_view text);

// A duration: "90s", "30m", "1h30m", or plain seconds ("600").
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text);

// A finite floating-point number.
absl::StatusOr<double> ParseDoubleFlag(absl::string_view flag, absl::string_view text);

// One of `choices`, case-insensitive; returns the matching choice's index.
absl::StatusOr<int> ParseChoiceFlag(absl::string_view flag, absl::string_view text,
                                    const std::vector<std::string>& choices);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FLAG_VALUES_H_
