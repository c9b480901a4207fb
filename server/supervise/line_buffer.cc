#include "server/supervise/line_buffer.h"

namespace vramlab::server {

bool LineBuffer::Append(absl::string_view bytes, std::vector<std::string>* lines) {
  if (overflowed_) return false;
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    absl::string_view piece = bytes.substr(0, newline);
    if (partial_.size() + piece.size() > max_line_bytes_) {
      overflowed_ = true;
      partial_.clear();
      partial_.shrink_to_fit();
      return false;
    }
    if (newline == absl::string_view::npos) {
      partial_.append(piece.data(), piece.size());
      return true;
    }
    partial_.append(piece.data(), piece.size());
    lines->push_back(std::move(partial_));
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
  return true;
}

}  // namespace vramlab::server
