#include "server/common/bounded_text.h"

#include <string>

#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

TEST(BoundedTextTest, ShortTextIsKeptWhole) {
  EXPECT_EQ(BoundedText("invalid spec", 64), "invalid spec");
  const std::string exact(100, 'x');
  EXPECT_EQ(BoundedText(exact, 100), exact);
}

TEST(BoundedTextTest, LongTextIsCutToTheBoundAndSaysHowMuchWasCut) {
  const std::string text(100000, 'x');
  const std::string bounded = BoundedText(text, 1024);
  EXPECT_LE(bounded.size(), 1024u);
  const size_t kept = bounded.find(" ... (");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ(bounded.substr(0, kept), text.substr(0, kept));
  EXPECT_EQ(bounded.substr(kept), " ... (" + std::to_string(text.size() - kept) + " bytes cut)");
}

TEST(BoundedTextTest, TheCutNeverSplitsACharacter) {
  // "é" is two bytes: a bound that falls inside one keeps the character out whole.
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "\xC3\xA9";
  for (size_t bound = 64; bound < 80; ++bound) {
    const std::string bounded = BoundedText(text, bound);
    EXPECT_LE(bounded.size(), bound);
    const size_t kept = bounded.find(" ... (");
    ASSERT_NE(kept, std::string::npos);
    EXPECT_EQ(kept % 2, 0u) << "bound " << bound;
    EXPECT_EQ(bounded.substr(kept), " ... (" + std::to_string(text.size() - kept) + " bytes cut)");
  }
}

}  // namespace
}  // namespace vramlab::server
