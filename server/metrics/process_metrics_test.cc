#include "server/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <ctime>
#include <sstream>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/metrics/exposition_text.h"

namespace vramlab::server {
namespace {

TEST(ProcessMetricsTest, ParsesProcStatWithAnAwkwardCommandName) {
  // Field 2 may hold spaces and parentheses; fields count from the last ')'.
  const std::string line =
      "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 123456 "
      "987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto stat = ParseProcStat(line);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->utime_ticks, 250);
  EXPECT_EQ(stat->stime_ticks, 75);
  EXPECT_EQ(stat->start_time_ticks, 123456);
  EXPECT_EQ(stat->virtual_bytes, 987654321);
  EXPECT_EQ(stat->resident_pages, 2048);
}

TEST(ProcessMetricsTest, TruncatedProcStatIsNotParsed) {
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcStat("no parenthesis").has_value());
}

TEST(ProcessMetricsTest, ParsesBootTime) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), 1700000000);
  EXPECT_FALSE(ParseBootTime("cpu  1 2 3\n").has_value());
}

TEST(ProcessMetricsTest, ThisProcessReadsPlausibly) {
  std::vector<prometheus::MetricFamily> families;
  CollectProcessMetrics(families);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  const std::string text = out.str();
  const auto start = vramlab::testing::SeriesValue(text, "process_start_time_seconds");
  ASSERT_TRUE(start.has_value()) << text;
  EXPECT_LE(*start, static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_GT(*start, static_cast<double>(std::time(nullptr)) - 24 * 3600);
  const auto resident = vramlab::testing::SeriesValue(text, "process_resident_memory_bytes");
  const auto virtual_bytes = vramlab::testing::SeriesValue(text, "process_virtual_memory_bytes");
  ASSERT_TRUE(resident.has_value() && virtual_bytes.has_value()) << text;
  EXPECT_GT(*resident, 0);
  EXPECT_GE(*virtual_bytes, *resident);
  const auto cpu = vramlab::testing::SeriesValue(text, "process_cpu_seconds_total");
  ASSERT_TRUE(cpu.has_value()) << text;
  EXPECT_GE(*cpu, 0);
  // stdin, stdout and stderr at least.
  const auto open_fds = vramlab::testing::SeriesValue(text, "process_open_fds");
  ASSERT_TRUE(open_fds.has_value()) << text;
  EXPECT_GE(*open_fds, 3);
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(vramlab::testing::SeriesValue(text, "process_max_fds"),
            static_cast<double>(limit.rlim_cur));
}

}  // namespace
}  // namespace vramlab::server
