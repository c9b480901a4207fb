#include "common/layout/shard_layout.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace vramlab::layout {
namespace {

TEST(ShardLayoutTest, DividesRowsEvenlyWhenTheyDivide) {
  const ShardLayout layout({8, 3}, 2);
  EXPECT_EQ(layout.rows(), 8);
  EXPECT_EQ(layout.row_elements(), 3);
  EXPECT_EQ(layout.chunk_rows(), 4);
  EXPECT_EQ(layout.chunk_elements(), 12);
  EXPECT_EQ(layout.padded_rows(), 8);
  EXPECT_EQ(layout.padded_elements(), layout.elements());
  EXPECT_EQ(layout.OwnedRows(0).begin, 0);
  EXPECT_EQ(layout.OwnedRows(0).end, 4);
  EXPECT_EQ(layout.OwnedRows(1).begin, 4);
  EXPECT_EQ(layout.OwnedRows(1).end, 8);
  EXPECT_EQ(layout.ChunkShape(), (std::vector<int64_t>{4, 3}));
}

TEST(ShardLayoutTest, PadsTheLastRanksWithRows) {
  // 10 rows over 4 ranks: 3 each, 12 padded; rank 3 holds row 9 and two padding rows.
  const ShardLayout layout({10, 2, 5}, 4);
  EXPECT_EQ(layout.chunk_rows(), 3);
  EXPECT_EQ(layout.row_elements(), 10);
  EXPECT_EQ(layout.padded_rows(), 12);
  EXPECT_EQ(layout.padded_elements(), 120);
  EXPECT_EQ(layout.elements(), 100);
  const int64_t expected[4][2] = {{0, 3}, {3, 6}, {6, 9}, {9, 10}};
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(layout.OwnedRows(rank).begin, expected[rank][0]) << rank;
    EXPECT_EQ(layout.OwnedRows(rank).end, expected[rank][1]) << rank;
  }
  EXPECT_EQ(layout.ChunkShape(), (std::vector<int64_t>{3, 2, 5}));
}

TEST(ShardLayoutTest, RanksBeyondTheRowsOwnNoRowsButAFullChunk) {
  // 3 rows over 4 ranks: one row each, rank 3 holds only padding.
  const ShardLayout layout({3}, 4);
  EXPECT_EQ(layout.chunk_rows(), 1);
  EXPECT_EQ(layout.chunk_elements(), 1);
  EXPECT_EQ(layout.OwnedRows(2).size(), 1);
  EXPECT_EQ(layout.OwnedRows(3).size(), 0);
  EXPECT_EQ(layout.OwnedRows(3).begin, 3);
  // 5 rows over 4 ranks: chunks of 2, so rank 3 is past the end too.
  const ShardLayout five({5, 7}, 4);
  EXPECT_EQ(five.chunk_rows(), 2);
  EXPECT_EQ(five.OwnedRows(2).size(), 1);
  EXPECT_EQ(five.OwnedRows(3).size(), 0);
}

TEST(ShardLayoutTest, OneRankOwnsEverything) {
  const ShardLayout layout({7, 2}, 1);
  EXPECT_EQ(layout.chunk_rows(), 7);
  EXPECT_EQ(layout.padded_elements(), 14);
  EXPECT_EQ(layout.OwnedRows(0).end, 7);
}

TEST(ShardLayoutTest, AScalarIsOneRow) {
  const ShardLayout layout({}, 2);
  EXPECT_EQ(layout.rows(), 1);
  EXPECT_EQ(layout.chunk_rows(), 1);
  EXPECT_EQ(layout.padded_elements(), 2);
  EXPECT_EQ(layout.OwnedRows(1).size(), 0);
  EXPECT_EQ(layout.ChunkShape(), (std::vector<int64_t>{1}));
}

TEST(ShardLayoutTest, RefusesBadArguments) {
  EXPECT_THROW(ShardLayout({4}, 0), std::invalid_argument);
  EXPECT_THROW(ShardLayout({-1}, 2), std::invalid_argument);
  EXPECT_THROW(ShardLayout({4}, 2).OwnedRows(2), std::out_of_range);
}

}  // namespace
}  // namespace vramlab::layout
