#include "server/supervise/line_buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::ElementsAre;

TEST(LineBufferTest, SplitsLinesAcrossChunks) {
  LineBuffer buffer(100);
  std::vector<std::string> lines;
  EXPECT_TRUE(buffer.Append("{\"a\":1}\n{\"b\"", &lines));
  EXPECT_TRUE(buffer.Append(":2}\n\n{\"c\":3", &lines));
  EXPECT_THAT(lines, ElementsAre("{\"a\":1}", "{\"b\":2}", ""));
  EXPECT_EQ(buffer.pending_bytes(), 6u);
}

TEST(LineBufferTest, LineLongerThanMaximumOverflowsWithoutGrowing) {
  LineBuffer buffer(10);
  std::vector<std::string> lines;
  EXPECT_TRUE(buffer.Append("0123456789\n", &lines));  // exactly the maximum is fine
  EXPECT_TRUE(buffer.Append("01234", &lines));
  EXPECT_FALSE(buffer.Append("567890", &lines));  // 11 bytes without a newline
  EXPECT_TRUE(buffer.overflowed());
  EXPECT_EQ(buffer.pending_bytes(), 0u);
  EXPECT_FALSE(buffer.Append("\nok\n", &lines));  // stays overflowed
  EXPECT_THAT(lines, ElementsAre("0123456789"));
}

}  // namespace
}  // namespace vramlab::server
