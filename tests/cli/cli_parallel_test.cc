// The parallel flags of vramlab submit / estimate against a real vramlabd on loopback:
// --world-size, --sharding, --reshard-after-forward and estimate's --smallest-world-size, the
// per-rank text beside the one-process one, its --json form, and the errors.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class CliParallelTest : public SharedDaemonTest<CliParallelTest> {
 public:
  static std::vector<std::string> DaemonFlags() {
    return {"--cpu-slots=2", "--worker-path=/bin/true"};
  }

 protected:
  static CliResult Run(std::vector<std::string> args) {
    args.push_back("--addr=" + daemon_->address());
    return RunCli(args);
  }
  // `args` with --json: the estimate it prints (a fatal failure unless it exits 0 with one).
  static void RunJson(std::vector<std::string> args, vramlab::v1::MemoryEstimate* estimate) {
    args.push_back("--json");
    const CliResult json = Run(args);
    ASSERT_EQ(json.exit_code, 0) << Describe(json);
    ASSERT_TRUE(ParseJson(json.out, *estimate)) << Describe(json);
  }
};

const std::vector<std::string> kEstimate = {"estimate",
                                            "--preset",
                                            "qwen2.5-1.5b",
                                            "--world-size",
                                            "4",
                                            "--sharding",
                                            "full",
                                            "--reshard-after-forward",
                                            "--limit",
                                            "24GiB",
                                            "--smallest-world-size"};

TEST_F(CliParallelTest, EstimateShowsTheRankBesideOneProcess) {
  const CliResult text = Run(kEstimate);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("ranks:4 shard:full+reshard"));
  EXPECT_THAT(text.out, HasSubstr("per rank, world size 4, SHARD_FULL, reshard after forward:\n"));
  EXPECT_THAT(text.out, ::testing::ContainsRegex("one process +per rank\n"));
  EXPECT_THAT(text.out, HasSubstr("gathered parameters"));
  EXPECT_THAT(text.out, HasSubstr("communication buffer"));
  EXPECT_THAT(text.out, HasSubstr("per rank limit 24.00 GiB: "));
  EXPECT_THAT(text.out, HasSubstr("per rank (world size 4, SHARD_FULL): "));  // the note

  vramlab::v1::MemoryEstimate estimate;
  ASSERT_NO_FATAL_FAILURE(RunJson(kEstimate, &estimate));
  const vramlab::v1::ParallelEstimate& rank = estimate.parallel();
  EXPECT_EQ(rank.world_size(), 4);
  EXPECT_EQ(rank.sharding(), "SHARD_FULL");
  EXPECT_TRUE(rank.reshard_after_forward());
  EXPECT_EQ(rank.searched_up_to(), 64);
  // The text states what the JSON holds.
  const std::string answer = rank.smallest_world_size_that_fits() > 0
                                 ? std::to_string(rank.smallest_world_size_that_fits())
                                 : "none up to 64";
  EXPECT_THAT(
      text.out,
      HasSubstr("smallest world size that fits 24.00 GiB with SHARD_FULL: " + answer + "\n"));
}

// --prefetch=false turns SHARD_FULL's prefetch off (on by default): the spec, the per-rank heading
// and the JSON say so, and the rank gathers one layer less than with prefetch.
TEST_F(CliParallelTest, PrefetchOffIsSentAndShown) {
  const std::vector<std::string> on_args = {
      "estimate", "--preset",   "tiny", "--world-size",
      "2",        "--sharding", "full", "--reshard-after-forward"};
  std::vector<std::string> off_args = on_args;
  off_args.push_back("--prefetch=false");
  const CliResult text = Run(off_args);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("shard:full+reshard+noprefetch"));
  EXPECT_THAT(
      text.out,
      HasSubstr("per rank, world size 2, SHARD_FULL, reshard after forward, no prefetch:\n"));

  vramlab::v1::MemoryEstimate with, without;
  ASSERT_NO_FATAL_FAILURE(RunJson(on_args, &with));
  ASSERT_NO_FATAL_FAILURE(RunJson(off_args, &without));
  EXPECT_TRUE(with.parallel().prefetch());
  EXPECT_FALSE(without.parallel().prefetch());
  EXPECT_GT(with.parallel().gathered_parameters_bytes(),
            without.parallel().gathered_parameters_bytes());
}

// A parallel sweep: the per-rank points as a second table, each row what the JSON holds.
TEST_F(CliParallelTest, EstimateOfAParallelSweepPredictsEachPointPerRank) {
  const std::vector<std::string> args = {
      "estimate",       "--preset", "qwen2.5-1.5b", "--world-size",    "4",   "--sharding",
      "full",           "--limit",  "8GiB",         "--checkpointing", "all", "--sweep-seq-lens",
      "2048,8192,16384"};
  const CliResult text = Run(args);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  vramlab::v1::MemoryEstimate estimate;
  ASSERT_NO_FATAL_FAILURE(RunJson(args, &estimate));
  ASSERT_EQ(estimate.parallel().points_size(), 3);
  const size_t table = text.out.find("sweep, predicted per point for one rank:\n");
  ASSERT_NE(table, std::string::npos) << text.out;
  // A row per point: its value, then its verdict as the one-process table words it.
  for (const auto& point : estimate.parallel().points()) {
    std::string verdict = vramlab::v1::FitVerdict_Name(point.verdict());
    if (verdict == "DOES_NOT_FIT") verdict = "DOES NOT FIT";
    EXPECT_THAT(text.out.substr(table),
                ::testing::ContainsRegex("\n +" + std::to_string(point.value()) + " +[^\n]*  " +
                                         verdict + " "))
        << point.value() << "\n"
        << text.out.substr(table);
  }
  EXPECT_THAT(text.out.substr(table),
              HasSubstr(estimate.parallel().predicted_first_oom_value() > 0
                            ? "predicted first point not to fit: seq_len " +
                                  std::to_string(estimate.parallel().predicted_first_oom_value())
                            : std::string("every point predicted to fit")));
}

TEST_F(CliParallelTest, WithoutTheSearchFlagNoSearchLine) {
  const CliResult text = Run({"estimate", "--preset", "tiny", "--world-size", "2", "--sharding",
                              "gradients", "--limit", "1GiB"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("per rank, world size 2, SHARD_GRADIENTS:\n"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("smallest world size")));
  // One process: no per-rank section.
  const CliResult one = Run({"estimate", "--preset", "tiny"});
  ASSERT_EQ(one.exit_code, 0) << Describe(one);
  EXPECT_THAT(one.out, ::testing::Not(HasSubstr("per rank")));
}

TEST_F(CliParallelTest, FlagErrorsAndTheSubmitOfMoreRanksThanSlots) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {{"estimate", "--preset", "tiny", "--sharding", "zero3"}, 2, "--sharding"},
      {{"estimate", "--preset", "tiny", "--world-size", "0"}, 2, "--world-size"},
      {{"estimate", "--preset", "tiny", "--world-size", "65"}, 2, "--world-size"},
      {{"estimate", "--preset", "tiny", "--sharding", "full"}, 2, "spec.parallel.sharding"},
      {{"estimate", "--preset", "tiny", "--world-size", "2", "--sharding", "gradients",
        "--prefetch=false"},
       2,
       "spec.parallel.prefetch: applies to SHARD_FULL only"},
      {{"submit", "--preset", "tiny", "--world-size", "3"},
       6,
       "this daemon has 2 CPU worker slot(s)"},
  };
  for (const Case& c : cases) {
    const CliResult r = Run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    EXPECT_THAT(r.err, StartsWith("vramlab: ")) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(c.detail)) << Describe(r);
  }
  // A world size the host's slots hold is accepted and queued.
  const CliResult accepted =
      Run({"submit", "--preset", "tiny", "--world-size", "2", "--sharding", "optimizer"});
  EXPECT_EQ(accepted.exit_code, 0) << Describe(accepted);
  EXPECT_THAT(accepted.out, HasSubstr("exp-")) << Describe(accepted);
}

}  // namespace
}  // namespace vramlab::cli_test
