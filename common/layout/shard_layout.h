// How SHARD_FULL splits one parameter over the ranks (FSDP2's per-parameter sharding): along
// dim 0, in equal chunks of ceil(rows / world_size) rows, the last ones padded with zero rows so
// that every rank holds the same number of elements. Rank r owns rows [r * chunk, (r + 1) * chunk)
// of the padded tensor; the rows of it that exist in the parameter are OwnedRows(r), possibly
// none (more ranks than rows). A 0-dim parameter counts as one row of one element.
//
// The padded tensor's elements, in row-major order, are the concatenation of the ranks' chunks
// in rank order: an all-gather of the chunks is the padded parameter, and rows [0, rows) of it
// are the parameter itself.
#ifndef VRAMLAB_COMMON_LAYOUT_SHARD_LAYOUT_H_
#define VRAMLAB_COMMON_LAYOUT_SHARD_LAYOUT_H_

#include <cstdint>
#include <vector>

namespace vramlab::layout {

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive; begin == end: no rows

  int64_t size() const { return end - begin; }
};

class ShardLayout {
 public:
  // `shape`: the parameter's sizes; world_size >= 1. Throws std::invalid_argument for a
  // world_size < 1 or a negative size.
  ShardLayout(const std::vector<int64_t>& shape, int world_size);

  int world_size() const { return world_size_; }
  int64_t rows() const { return rows_; }
  // Elements per row: the product of the sizes after dim 0 (1 for a 0-dim or 1-dim parameter).
  int64_t row_elements() const { return row_elements_; }
  // Rows per rank, ceil(rows / world_size).
  int64_t chunk_rows() const { return chunk_rows_; }
  int64_t chunk_elements() const { return chunk_rows_ * row_elements_; }
  // world_size * chunk_rows: the rows of the padded parameter.
  int64_t padded_rows() const { return chunk_rows_ * world_size_; }
  int64_t padded_elements() const { return padded_rows() * row_elements_; }
  int64_t elements() const { return rows_ * row_elements_; }

  // The parameter's rows that rank `rank` holds, within [0, rows()).
  RowRange OwnedRows(int rank) const;
  // The shape of one rank's chunk: the parameter's, with dim 0 = chunk_rows ({chunk_rows} for a
  // 0-dim parameter).
  std::vector<int64_t> ChunkShape() const;

 private:
  std::vector<int64_t> shape_;
  int world_size_;
  int64_t rows_;
  int64_t row_elements_;
  int64_t chunk_rows_;
};

}  // namespace vramlab::layout

#endif  // VRAMLAB_COMMON_LAYOUT_SHARD_LAYOUT_H_
