// Splits a byte stream into lines without ever holding more than `max_line_bytes` of an
// unfinished line: a worker that writes a huge line (or no newline at all) cannot grow the
// daemon's memory. Not thread-safe; one per worker pipe.
#ifndef VRAMLAB_SERVER_SUPERVISE_LINE_BUFFER_H_
#define VRAMLAB_SERVER_SUPERVISE_LINE_BUFFER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vramlab::server {

class LineBuffer {
 public:
  explicit LineBuffer(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Appends `bytes`; every completed line (without its '\n') is appended to `lines`. Returns
  // false once a line has exceeded the maximum; the buffer then stays overflowed and drops input.
  bool Append(absl::string_view bytes, std::vector<std::string>* lines);

  bool overflowed() const { return overflowed_; }
  // Bytes of the unfinished line (a stream that ends with them ended mid-line).
  size_t pending_bytes() const { return partial_.size(); }

 private:
  size_t max_line_bytes_;
  std::string partial_;
  bool overflowed_ = false;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_LINE_BUFFER_H_
