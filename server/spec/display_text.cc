#include "server/spec/display_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vramlab::server {
namespace {

// The code point starting at text[*i], advancing *i past it; -1 for a malformed sequence.
int32_t DecodeUtf8(absl::string_view text, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(*i);
  if (lead < 0x80) {
    ++*i;
    return lead;
  }
  int length;
  int32_t code;
  int32_t smallest;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07, smallest = 0x10000;
  } else {
    return -1;
  }
  if (*i + length > text.size()) return -1;
  for (int k = 1; k < length; ++k) {
    const uint8_t next = byte(*i + k);
    if ((next & 0xC0) != 0x80) return -1;
    code = (code << 6) | (next & 0x3F);
  }
  if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return -1;
  *i += length;
  return code;
}

bool IsControl(int32_t code) { return code < 0x20 || (code >= 0x7F && code <= 0x9F); }

bool IsBidiFormatting(int32_t code) {
  return code == 0x061C || code == 0x200E || code == 0x200F || (code >= 0x202A && code <= 0x202E) ||
         (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

absl::Status CheckDisplayText(absl::string_view field, absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = i;
    const int32_t code = DecodeUtf8(text, &i);
    if (code < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": not valid UTF-8 (at byte ", at, ")"));
    }
    if (IsControl(code)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: contains a control character (U+%04X at byte %d)", field, code, at));
    }
    if (IsBidiFormatting(code)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: contains a bidirectional formatting character (U+%04X at byte %d)",
                          field, code, at));
    }
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
