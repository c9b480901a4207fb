#include "server/spec/display_text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;

TEST(DisplayTextTest, AcceptsPlainAndInternationalText) {
  EXPECT_TRUE(CheckDisplayText("name", "").ok());
  EXPECT_TRUE(CheckDisplayText("name", "qwen 1.5b, mb 4 — seq 2048").ok());
  EXPECT_TRUE(CheckDisplayText("name", "学習 メモリ").ok());
  EXPECT_TRUE(CheckDisplayText("name", "\xF0\x9F\x94\xA5 hot").ok());              // U+1F525
  EXPECT_TRUE(CheckDisplayText("name", "\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A").ok());  // Arabic letters
}

TEST(DisplayTextTest, RefusesMalformedUtf8NamingTheFieldAndOffset) {
  for (const std::string bad : {std::string("ab\xFF"), std::string("\xC0\xAF"),  // overlong '/'
                                std::string("\xED\xA0\x80"),                     // a surrogate
                                std::string("\xF4\x90\x80\x80"),                 // past U+10FFFF
                                std::string("x\xE2\x82"),                        // cut short
                                std::string("\x80")}) {
    absl::Status status = CheckDisplayText("spec.name", bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("spec.name: not valid UTF-8 (at byte "));
  }
  EXPECT_THAT(CheckDisplayText("spec.name", "ab\xFF").message(), HasSubstr("at byte 2"));
}

TEST(DisplayTextTest, RefusesBidiFormattingAndControls) {
  EXPECT_THAT(
      CheckDisplayText("spec.name", "evil\xE2\x80\xAEtxt.exe").message(),  // U+202E
      HasSubstr("spec.name: contains a bidirectional formatting character (U+202E at byte 4)"));
  EXPECT_THAT(CheckDisplayText("spec.name",
                               "a\xE2\x81\xA6"
                               "b")
                  .message(),  // U+2066
              HasSubstr("U+2066"));
  EXPECT_THAT(CheckDisplayText("spec.name", "a\xE2\x80\x8F").message(), HasSubstr("U+200F"));
  EXPECT_THAT(CheckDisplayText("spec.name", "tab\there").message(),
              HasSubstr("contains a control character (U+0009 at byte 3)"));
  EXPECT_THAT(CheckDisplayText("spec.name", "c1\xC2\x9B").message(), HasSubstr("U+009B"));
  EXPECT_THAT(CheckDisplayText("spec.name", "del\x7F").message(), HasSubstr("U+007F"));
}

}  // namespace
}  // namespace vramlab::server
