// Parallel specs against a real daemon on loopback (two CPU worker slots): each bad
// spec.parallel is refused naming the field, more ranks than the host's slots is
// FAILED_PRECONDITION with both counts, and EstimateMemory predicts any valid world size per rank.
// Parallel runs with the real worker: tests/daemon/daemon_gang_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/spec/parallel_rules.h"
#include "common/spec/spec_ranges.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

ExperimentSpec Parallel(int32_t world_size, vramlab::v1::Sharding sharding) {
  ExperimentSpec spec = TinySpec();
  spec.mutable_parallel()->set_world_size(world_size);
  spec.mutable_parallel()->set_sharding(sharding);
  return spec;
}

absl::StatusOr<vramlab::v1::MemoryEstimate> Estimate(vramlab::v1::VramlabService::Stub& stub,
                                                     const ExperimentSpec& spec, int64_t limit,
                                                     bool smallest_world_size) {
  grpc::ClientContext context;
  vramlab::v1::EstimateMemoryRequest request;
  *request.mutable_spec() = spec;
  request.set_limit_bytes(limit);
  request.set_smallest_world_size(smallest_world_size);
  vramlab::v1::MemoryEstimate estimate;
  const grpc::Status status = stub.EstimateMemory(&context, request, &estimate);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return estimate;
}

TEST(DaemonParallelTest, BadParallelSpecsAreRefusedNamingTheField) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--cpu-slots=2", "--worker-path=/bin/true"}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  struct Case {
    const char* name;
    ExperimentSpec spec;
    absl::StatusCode code;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"world size over the rule",
       Parallel(65, vramlab::v1::SHARD_NONE),
       absl::StatusCode::kInvalidArgument,
       {"spec.parallel.world_size: must be between 0 and 64, got 65"}},
      {"negative world size",
       Parallel(-1, vramlab::v1::SHARD_NONE),
       absl::StatusCode::kInvalidArgument,
       {"spec.parallel.world_size"}},
      {"sharding with one rank",
       Parallel(1, vramlab::v1::SHARD_FULL),
       absl::StatusCode::kInvalidArgument,
       {"spec.parallel.sharding", spec_rules::kShardingNeedsRanksMessage}},
      {"unknown sharding",
       Parallel(2, static_cast<vramlab::v1::Sharding>(7)),
       absl::StatusCode::kInvalidArgument,
       {"spec.parallel.sharding: unknown enum value 7"}},
      {"more ranks than slots",
       Parallel(3, vramlab::v1::SHARD_GRADIENTS),
       absl::StatusCode::kFailedPrecondition,
       {"spec.parallel.world_size: 3 ranks", "this daemon has 2 CPU worker slot(s)"}},
  };
  for (const Case& c : cases) {
    auto result = Submit(*stub, c.spec);
    EXPECT_EQ(result.status().code(), c.code) << c.name << ": " << result.status();
    for (const std::string& word : c.words) {
      EXPECT_THAT(result.status().message(), HasSubstr(word)) << c.name;
    }
  }
  // EstimateMemory refuses the same malformed values, and predicts any valid world size, also
  // one larger than this host has.
  auto bad = Estimate(*stub, Parallel(1, vramlab::v1::SHARD_OPTIMIZER), 0, false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  for (int32_t n : {2, 8}) {
    auto estimate = Estimate(*stub, Parallel(n, vramlab::v1::SHARD_FULL), 0, false);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    EXPECT_EQ(estimate->parallel().world_size(), n);
    EXPECT_EQ(estimate->parallel().sharding(), "SHARD_FULL");
    EXPECT_LT(estimate->parallel().anatomy().optimizer_state_bytes(),
              estimate->anatomy().optimizer_state_bytes());
  }
  // The world-size search: with a limit at which a rank of 2 is FITS, it answers at most 2.
  auto at_two = Estimate(*stub, Parallel(2, vramlab::v1::SHARD_FULL), int64_t{1} << 40, false);
  ASSERT_TRUE(at_two.ok()) << at_two.status();
  auto searched = Estimate(*stub, Parallel(2, vramlab::v1::SHARD_FULL),
                           at_two->parallel().reserved_high_bytes(), true);
  ASSERT_TRUE(searched.ok()) << searched.status();
  EXPECT_GE(searched->parallel().smallest_world_size_that_fits(), 1);
  EXPECT_LE(searched->parallel().smallest_world_size_that_fits(), 2);
  EXPECT_EQ(searched->parallel().searched_up_to(), spec_rules::kWorldSize.max);

  // Nothing was queued, and a one-process spec is still accepted.
  grpc::ClientContext info_context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub->GetServerInfo(&info_context, {}, &info).ok());
  EXPECT_EQ(info.queue_depth() + info.running(), 0);
  EXPECT_TRUE(Submit(*stub, Parallel(1, vramlab::v1::SHARD_NONE)).ok());
}

}  // namespace
}  // namespace vramlab::testing
