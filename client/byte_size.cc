#include "client/byte_size.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace vramlab::client {
namespace {

struct Unit {
  const char* suffix;
  int shift;  // power of two
};

// Longest suffixes first so that "GiB" is not read as "G" followed by garbage.
constexpr Unit kUnits[] = {
    {"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40}, {"kb", 10}, {"mb", 20}, {"gb", 30},
    {"tb", 40},  {"k", 10},   {"m", 20},   {"g", 30},   {"t", 40},  {"b", 0},
};

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  absl::string_view rest = lowered;
  int shift = 0;
  for (const Unit& unit : kUnits) {
    if (absl::ConsumeSuffix(&rest, unit.suffix)) {
      shift = unit.shift;
      break;
    }
  }
  rest = absl::StripAsciiWhitespace(rest);
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid byte size \"", text, "\" (expected e.g. 24GiB, 512MiB, 1.5G or plain bytes)"));
  };
  if (rest.empty() || rest.front() == '-' || rest.front() == '+') return invalid();
  for (char c : rest) {
    if (!absl::ascii_isdigit(c) && c != '.') return invalid();
  }
  std::string number(rest);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return invalid();
  const double bytes = std::ldexp(value, shift);
  if (bytes >= 9.2e18) {
    return absl::InvalidArgumentError(absl::StrCat("byte size \"", text, "\" is too large"));
  }
  if (shift == 0 && bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size \"", text, "\" is not whole bytes"));
  }
  return static_cast<int64_t>(std::llround(bytes));
}

std::string FormatBytes(int64_t bytes) {
  const char* sign = bytes < 0 ? "-" : "";
  // int64 min has no positive counterpart; the unsigned magnitude covers it.
  const uint64_t magnitude =
      bytes < 0 ? static_cast<uint64_t>(-(bytes + 1)) + 1 : static_cast<uint64_t>(bytes);
  if (magnitude < 1024) return absl::StrCat(sign, magnitude, " B");
  static constexpr const char* kNames[] = {"KiB", "MiB", "GiB", "TiB"};
  int index = 0;
  double scaled = static_cast<double>(magnitude) / 1024.0;
  while (index < 3 && scaled >= 1024.0) {
    scaled /= 1024.0;
    ++index;
  }
  return absl::StrFormat("%s%.2f %s", sign, scaled, kNames[index]);
}

std::string FormatBytesDelta(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return bytes > 0 ? absl::StrCat("+", FormatBytes(bytes)) : FormatBytes(bytes);
}

}  // namespace vramlab::client
