#include "client/text_layout.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

TEST(TextLayoutTest, WidthsAreDejaVuSansAdvances) {
  // "0" is 0.636 em in Book and 0.696 em in Bold; a character beyond ASCII counts one em.
  EXPECT_DOUBLE_EQ(TextWidth("00", {10, false}), 12.72);
  EXPECT_DOUBLE_EQ(TextWidth("00", {10, true}), 13.92);
  EXPECT_DOUBLE_EQ(TextWidth("\xC3\x97", {10, false}), 10);  // "×": one character, two bytes
}

TEST(TextLayoutTest, BoxesFollowTheAnchor) {
  const Box start = TextBox("00", 100, 50, {10, false}, TextAnchor::kStart, 0);
  const Box end = TextBox("00", 100, 50, {10, false}, TextAnchor::kEnd, 0);
  EXPECT_DOUBLE_EQ(start.left, 100);
  EXPECT_DOUBLE_EQ(end.right, 100);
  EXPECT_DOUBLE_EQ(start.right - start.left, end.right - end.left);
  EXPECT_LT(start.top, 50);
  EXPECT_GT(start.bottom, 50);
  EXPECT_FALSE(start.Intersects(end));  // they touch at x = 100
}

TEST(TextLayoutTest, FitTextCutsToTheWidthOnACharacterBoundary) {
  const std::string long_text(200, 'n');
  const std::string cut = FitText(long_text, 300, {12, false});
  EXPECT_THAT(cut, ::testing::EndsWith("..."));
  EXPECT_LE(TextWidth(cut, {12, false}), 300);
  EXPECT_EQ(FitText("short", 300, {12, false}), "short");
  const std::string multibyte = FitText("\xC3\x97\xC3\x97\xC3\x97\xC3\x97", 25, {10, false});
  EXPECT_EQ(multibyte, "\xC3\x97...");
}

TEST(TextLayoutTest, APlacedLabelAvoidsEveryTakenBox) {
  LabelLayout layout(Box{0, 0, 500, 500});
  layout.OccupyText("predicted peak 4.47 MiB", 490, 100, {11, false}, TextAnchor::kEnd);
  LabelCandidates peak{"peak 4.49 MiB (backward)", {12, true}, TextAnchor::kEnd, {{490, 98}}};
  const auto placed = layout.Place(peak, 100);
  ASSERT_TRUE(placed.has_value());
  EXPECT_FALSE(
      TextBox(peak.text, placed->first, placed->second, peak.style, peak.anchor)
          .Intersects(TextBox("predicted peak 4.47 MiB", 490, 100, {11, false}, TextAnchor::kEnd)));
  // Nowhere to go within the shift allowed: no place rather than an overlap.
  LabelLayout full(Box{0, 0, 100, 20});
  full.Occupy(Box{0, 0, 100, 20});
  EXPECT_FALSE(full.Place({"x", {11, false}, TextAnchor::kStart, {{10, 15}}}, 40).has_value());
}

}  // namespace
}  // namespace vramlab::client
