#include "client/byte_size.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

TEST(ParseByteSizeTest, AcceptsBinaryUnitsInEverySpelling) {
  EXPECT_EQ(*ParseByteSize("24GiB"), 25769803776);
  EXPECT_EQ(*ParseByteSize("24G"), 25769803776);
  EXPECT_EQ(*ParseByteSize("24gb"), 25769803776);
  EXPECT_EQ(*ParseByteSize("512MiB"), 536870912);
  EXPECT_EQ(*ParseByteSize("512M"), 536870912);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1099511627776);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 1610612736);
  EXPECT_EQ(*ParseByteSize(" 48 GiB "), 51539607552);
}

TEST(ParseByteSizeTest, AcceptsPlainBytes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  EXPECT_EQ(*ParseByteSize("4096B"), 4096);
  EXPECT_EQ(*ParseByteSize("0"), 0);
}

TEST(ParseByteSizeTest, RejectsGarbageNegativeFractionalBytesAndOverflow) {
  for (const char* bad :
       {"", "GiB", "-1GiB", "+1G", "24 GiBs", "1e3", "abc", "1.2.3G", "0.5", "9999999999TiB"}) {
    auto result = ParseByteSize(bad);
    EXPECT_FALSE(result.ok()) << bad;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FormatBytesTest, PicksTheLargestUnitWithTwoDecimals) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(536870912), "512.00 MiB");
  EXPECT_EQ(FormatBytes(25769803776), "24.00 GiB");
  EXPECT_EQ(FormatBytes(3087428608), "2.88 GiB");
  EXPECT_EQ(FormatBytes(-2048), "-2.00 KiB");
  EXPECT_EQ(FormatBytes(INT64_MIN), "-8388608.00 TiB");
}

TEST(FormatBytesTest, DeltaCarriesItsSign) {
  EXPECT_EQ(FormatBytesDelta(0), "0 B");
  EXPECT_EQ(FormatBytesDelta(1 << 30), "+1.00 GiB");
  EXPECT_EQ(FormatBytesDelta(-512), "-512 B");
}

TEST(ByteSizeTest, RoundTripsWholeUnits) {
  for (int64_t bytes : {int64_t{1} << 20, int64_t{24} << 30, int64_t{7} << 10}) {
    std::string text = FormatBytes(bytes);
    text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
    EXPECT_EQ(*ParseByteSize(text), bytes) << text;
  }
}

}  // namespace
}  // namespace vramlab::client
