// The rank views against golden files, from synthesized Experiment protos (client/testdata/ranks):
// a 2-rank SHARD_FULL run that succeeded, a 2-rank run that ran out of memory on rank 1 (its
// deciding rank), and a one-process run beside them. Each view renders from the proto alone.
//
// To regenerate after an intended format change:
//   VRAMLAB_UPDATE_GOLDEN=1 ctest --test-dir build -R rank_views_golden_test   (then review the
//   diff)
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "client/anatomy_table.h"
#include "client/experiment_details.h"
#include "client/experiment_list.h"
#include "client/report_formats.h"
#include "client/timeline.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;

const std::string kDir = std::string(VRAMLAB_SOURCE_DIR) + "/client/testdata/ranks/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Experiment Load(const std::string& name) {
  Experiment experiment;
  const std::string text = ReadFile(kDir + name + ".textproto");
  EXPECT_FALSE(text.empty()) << "missing " << kDir << name << ".textproto";
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &experiment)) << name;
  return experiment;
}

// Compares `actual` with the golden file `name` (rewriting it first with VRAMLAB_UPDATE_GOLDEN).
void ExpectGolden(const std::string& actual, const std::string& name) {
  const std::string path = kDir + name;
  if (std::getenv("VRAMLAB_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << actual;
  EXPECT_EQ(actual, ReadFile(path))
      << "golden " << path << "; actual:\n"
      << actual << "\nregenerate with VRAMLAB_UPDATE_GOLDEN=1 if intended";
}

TEST(RankViewsGoldenTest, ShowOfATwoRankShardFullSuccess) {
  ExpectGolden(RenderExperimentDetails(Load("shard_full_success")), "show_success.golden");
}

TEST(RankViewsGoldenTest, ShowOfATwoRankFailureNamesTheDecidingRank) {
  ExpectGolden(RenderExperimentDetails(Load("two_rank_oom")), "show_failure.golden");
}

TEST(RankViewsGoldenTest, CompareByThePerRankPeakWithWorldSizeAndSharding) {
  ExpectGolden(
      RenderCompareTable({Load("one_process"), Load("shard_full_success"), Load("two_rank_oom")}),
      "compare.golden");
}

TEST(RankViewsGoldenTest, LsShowsWorldSizeTimesSlots) {
  vramlab::v1::ListExperimentsResponse list;
  *list.add_experiments() = Load("two_rank_oom");
  *list.add_experiments() = Load("shard_full_success");
  *list.add_experiments() = Load("one_process");
  ExpectGolden(RenderExperimentList(list), "ls.golden");
}

TEST(RankViewsGoldenTest, TextReportsHaveThePerRankTable) {
  const Timeline no_readings = BuildTimeline({});
  ExpectGolden(RenderTextReport(Load("shard_full_success"), no_readings), "report_success.golden");
  ExpectGolden(RenderTextReport(Load("two_rank_oom"), no_readings), "report_failure.golden");
}

TEST(RankViewsGoldenTest, HtmlReportHasThePerRankTable) {
  ExpectGolden(RenderHtmlReport(Load("two_rank_oom"), BuildTimeline({})),
               "report_failure.html.golden");
}

}  // namespace
}  // namespace vramlab::client
