// ExperimentSpec.parallel: parsing, defaults and the errors that name their field.
#include <string>

#include <gtest/gtest.h>

#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"
#include "common/spec/spec_ranges.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {
namespace {

ExperimentSpec ParseWithParallel(const std::string& parallel_json, const std::string& extra = "") {
  return ParseExperimentSpec(R"({"model": {"preset": "tiny"}, "parallel": )" + parallel_json +
                             extra + "}");
}

// The SpecError that parsing throws; fails the test if it parses.
SpecError ParallelError(const std::string& parallel_json, const std::string& extra = "") {
  try {
    ParseWithParallel(parallel_json, extra);
  } catch (const SpecError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed: " << parallel_json << extra;
  return SpecError("", "");
}

TEST(ParallelSpecTest, AbsentMeansOneProcessWithoutSharding) {
  const ExperimentSpec spec = ParseExperimentSpec(R"({"model": {"preset": "tiny"}})");
  EXPECT_EQ(spec.parallel.world_size, 1);
  EXPECT_EQ(spec.parallel.sharding, Sharding::kShardNone);
  EXPECT_FALSE(spec.parallel.reshard_after_forward);
  EXPECT_EQ(spec.parallel.prefetch, spec_rules::kDefaultPrefetch);
  EXPECT_TRUE(spec.parallel.prefetch) << "FSDP2 prefetches by default";
  EXPECT_FALSE(ParallelActive(spec.parallel));
}

TEST(ParallelSpecTest, ReadsCamelCaseSnakeCaseAndEnumNumbers) {
  const ExperimentSpec camel =
      ParseWithParallel(R"({"worldSize": 4, "sharding": "SHARD_GRADIENTS"})");
  EXPECT_EQ(camel.parallel.world_size, 4);
  EXPECT_EQ(camel.parallel.sharding, Sharding::kShardGradients);
  EXPECT_TRUE(ParallelActive(camel.parallel));
  const ExperimentSpec snake =
      ParseWithParallel(R"({"world_size": 2, "sharding": 4, "reshard_after_forward": true})");
  EXPECT_EQ(snake.parallel.world_size, 2);
  EXPECT_EQ(snake.parallel.sharding, Sharding::kShardFull);
  EXPECT_TRUE(snake.parallel.reshard_after_forward);
  EXPECT_EQ(ParseWithParallel(R"({"worldSize": 0})").parallel.world_size, 1)
      << "0 means one process";
  EXPECT_EQ(ParseWithParallel(R"({"worldSize": 2, "sharding": "SHARDING_UNSPECIFIED"})")
                .parallel.sharding,
            Sharding::kShardNone);
}

TEST(ParallelSpecTest, RejectsWorldSizeOutOfRange) {
  for (const char* json : {R"({"worldSize": -1})", R"({"worldSize": 65})"}) {
    EXPECT_EQ(ParallelError(json).field(), "parallel.world_size") << json;
  }
  EXPECT_EQ(ParseWithParallel(R"({"worldSize": 64})").parallel.world_size,
            spec_rules::kWorldSize.max);
}

TEST(ParallelSpecTest, ShardingNeedsTwoRanks) {
  for (const char* json :
       {R"({"sharding": "SHARD_OPTIMIZER"})", R"({"worldSize": 1, "sharding": "SHARD_FULL"})"}) {
    const SpecError e = ParallelError(json);
    EXPECT_EQ(e.field(), spec_rules::kShardingField) << json;
    EXPECT_NE(std::string(e.what()).find(spec_rules::kShardingNeedsRanksMessage), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ParseWithParallel(R"({"worldSize": 1, "sharding": "SHARD_NONE"})").parallel.sharding,
            Sharding::kShardNone);
}

TEST(ParallelSpecTest, RejectsUnknownShardingAndFields) {
  EXPECT_EQ(ParallelError(R"({"worldSize": 2, "sharding": "SHARD_EVERYTHING"})").field(),
            "parallel.sharding");
  EXPECT_EQ(ParallelError(R"({"worldSize": 2, "ranks": 2})").field(), "parallel.ranks");
}

TEST(ParallelSpecTest, ReshardAfterForwardOnlyWithFullSharding) {
  EXPECT_EQ(ParallelError(
                R"({"worldSize": 2, "sharding": "SHARD_OPTIMIZER", "reshardAfterForward": true})")
                .field(),
            "parallel.reshard_after_forward");
}

TEST(ParallelSpecTest, PrefetchOffOnlyWithFullSharding) {
  EXPECT_FALSE(ParseWithParallel(R"({"worldSize": 2, "sharding": "SHARD_FULL", "prefetch": false})")
                   .parallel.prefetch);
  EXPECT_TRUE(ParseWithParallel(R"({"worldSize": 2, "sharding": "SHARD_FULL", "prefetch": true})")
                  .parallel.prefetch);
  EXPECT_TRUE(ParseWithParallel(R"({"worldSize": 2, "sharding": "SHARD_FULL"})").parallel.prefetch);
  const SpecError e =
      ParallelError(R"({"worldSize": 2, "sharding": "SHARD_GRADIENTS", "prefetch": false})");
  EXPECT_EQ(e.field(), spec_rules::kPrefetchField);
  EXPECT_NE(std::string(e.what()).find(spec_rules::kFullShardingOnlyMessage), std::string::npos)
      << e.what();
  // The default stated explicitly is no refusal.
  EXPECT_TRUE(ParseWithParallel(R"({"worldSize": 2, "sharding": "SHARD_NONE", "prefetch": true})")
                  .parallel.prefetch);
}

TEST(ParallelSpecTest, RefusesWhatWouldLetRanksDiverge) {
  // A sweep parses: each point runs as its own gang, and a rank started without --sweep-point
  // refuses it with the launch flags (rank_flags_test).
  EXPECT_TRUE(
      SweepActive(ParseWithParallel(R"({"worldSize": 2})",
                                    R"(, "sweep": {"variable": "SEQ_LEN", "values": [8, 16]})")
                      .sweep));
  EXPECT_EQ(
      ParallelError(R"({"worldSize": 2})", R"(, "training": {"optimizer": {"inBackward": true}})")
          .field(),
      "training.optimizer.in_backward");
  EXPECT_EQ(
      ParallelError(R"({"worldSize": 2})",
                    R"(, "training": {"optimizer": {"offloadToCpu": true, "delayedUpdate": true}})")
          .field(),
      spec_rules::kDelayedUpdateField);
  EXPECT_NO_THROW(ParseWithParallel(
      R"({"worldSize": 1})",
      R"(, "training": {"optimizer": {"offloadToCpu": true, "delayedUpdate": true}})"));
  // One process: both are as before.
  EXPECT_NO_THROW(ParseWithParallel(R"({"worldSize": 1})",
                                    R"(, "training": {"optimizer": {"inBackward": true}})"));
}

}  // namespace
}  // namespace vramlab::worker
