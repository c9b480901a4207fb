// Aligned plain-text tables for terminal output: a header row, then rows; columns separated by
// two spaces, numbers right-aligned. Widths count UTF-8 code points, not bytes.
#ifndef VRAMLAB_CLIENT_TEXT_TABLE_H_
#define VRAMLAB_CLIENT_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace vramlab::client {

class TextTable {
 public:
  enum class Align { kLeft, kRight };

  // One entry per column: its header and alignment.
  TextTable(std::vector<std::string> headers, std::vector<Align> aligns);

  // Rows shorter than the header are padded with empty cells.
  void AddRow(std::vector<std::string> cells);
  size_t row_count() const { return rows_.size(); }

  // Header, then every row, each line ending in '\n' with trailing spaces trimmed.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// Number of UTF-8 code points in `text`.
size_t DisplayWidth(const std::string& text);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_TEXT_TABLE_H_
