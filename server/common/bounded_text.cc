#include "server/common/bounded_text.h"

#include "absl/strings/str_cat.h"

namespace vramlab::server {

std::string BoundedText(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // The marker at its longest: as many digits as the whole text's size has.
  const size_t marker_bytes = absl::StrCat(" ... (", text.size(), " bytes cut)").size();
  size_t keep = max_bytes - marker_bytes;
  // Back off continuation bytes (10xxxxxx), so that the kept part stays valid UTF-8.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return absl::StrCat(text.substr(0, keep), " ... (", text.size() - keep, " bytes cut)");
}

}  // namespace vramlab::server
