#include "common/layout/shard_layout.h"

#include <algorithm>
#include <stdexcept>

namespace vramlab::layout {

ShardLayout::ShardLayout(const std::vector<int64_t>& shape, int world_size)
    : shape_(shape),
      world_size_(world_size),
      rows_(shape.empty() ? 1 : shape[0]),
      row_elements_(1) {
  if (world_size < 1) throw std::invalid_argument("ShardLayout: world_size must be >= 1");
  for (int64_t size : shape) {
    if (size < 0) throw std::invalid_argument("ShardLayout: negative size");
  }
  for (size_t d = 1; d < shape.size(); ++d) row_elements_ *= shape[d];
  chunk_rows_ = (rows_ + world_size - 1) / world_size;
}

RowRange ShardLayout::OwnedRows(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw std::out_of_range("ShardLayout::OwnedRows: no such rank");
  const int64_t begin = std::min(rows_, rank * chunk_rows_);
  const int64_t end = std::min(rows_, begin + chunk_rows_);
  return {begin, end};
}

std::vector<int64_t> ShardLayout::ChunkShape() const {
  std::vector<int64_t> chunk = shape_.empty() ? std::vector<int64_t>{1} : shape_;
  chunk[0] = chunk_rows_;
  return chunk;
}

}  // namespace vramlab::layout
