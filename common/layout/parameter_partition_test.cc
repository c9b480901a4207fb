#include "common/layout/parameter_partition.h"

#include <gtest/gtest.h>

namespace vramlab::layout {
namespace {

TEST(ParameterPartitionTest, LargestFirstToTheLeastLoadedRank) {
  // Largest first: 100 (index 1) -> rank 0, loads {100, 0}; 60 (3) -> 1, {100, 60}; 50 (2) -> 1,
  // {100, 110}; 10 (0) -> 0, {110, 110}; 10 (4) -> 0, the lower of two equal loads.
  const std::vector<int> owner = PartitionParameters({10, 100, 50, 60, 10}, 2);
  EXPECT_EQ(owner, (std::vector<int>{0, 0, 1, 1, 0}));
}

TEST(ParameterPartitionTest, EqualSizesKeepModelOrderAndOneRankOwnsAll) {
  EXPECT_EQ(PartitionParameters({4, 4, 4, 4}, 2), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(PartitionParameters({3, 1, 2}, 1), (std::vector<int>{0, 0, 0}));
}

TEST(ParameterPartitionTest, MoreRanksThanParametersLeavesSomeEmpty) {
  EXPECT_EQ(PartitionParameters({5, 7}, 4), (std::vector<int>{1, 0}));
  EXPECT_TRUE(PartitionParameters({}, 3).empty());
  EXPECT_THROW(PartitionParameters({1}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace vramlab::layout
