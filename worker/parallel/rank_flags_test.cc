// How a worker process becomes a rank: --rank and --rendezvous against the spec's world size,
// checked before any device or network is touched (RunWorker in this process).
#include "worker/parallel/rank_group.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "common/exit_codes.h"
#include "common/spec/parallel_rules.h"
#include "worker/train/testing/captured_run.h"

namespace vramlab::worker {
namespace {

std::string TinySpec(const std::string& parallel) {
  return R"({"model": {"preset": "tiny"}, "device": "CPU", "training": {"seqLen": 8, "dtype": "FLOAT32"},
             "parallel": )" +
         parallel + "}";
}

// The error event of a run that must be refused as an invalid spec.
nlohmann::json RefusedRun(const std::string& spec, const RankFlags& flags,
                          const std::optional<spec_rules::SweepPoint>& point = std::nullopt) {
  WorkerHooks hooks;
  hooks.rank_flags = flags;
  hooks.sweep_point = point;
  const testing::CapturedRun run = testing::RunCaptured(spec, hooks);
  EXPECT_EQ(run.exit_code, kExitInvalidSpec);
  const auto errors = run.Of("error");
  if (errors.size() != 1) {
    ADD_FAILURE() << "expected one error event, got " << errors.size();
    return nlohmann::json::object();
  }
  EXPECT_TRUE(run.Of("started").empty()) << "refused before the device was touched";
  return errors[0];
}

TEST(RankFlagsTest, ParallelSpecWithoutRankNamesTheWorldSize) {
  const nlohmann::json error = RefusedRun(TinySpec(R"({"worldSize": 2})"), {});
  EXPECT_EQ(error["field"], "parallel.world_size");
  EXPECT_NE(error["message"].get<std::string>().find(
                "a parallel run's ranks are started with --rank and --rendezvous"),
            std::string::npos)
      << error;
}

TEST(RankFlagsTest, RankOutsideTheWorldOrWithoutRendezvousIsRefused) {
  EXPECT_EQ(RefusedRun(TinySpec(R"({"worldSize": 2})"), {2, "127.0.0.1:1"})["field"],
            "parallel.world_size");
  EXPECT_EQ(RefusedRun(TinySpec(R"({"worldSize": 2})"), {0, ""})["field"], "parallel.world_size");
}

TEST(RankFlagsTest, SingleProcessSpecTakesNoRank) {
  EXPECT_EQ(RefusedRun(TinySpec(R"({"worldSize": 1})"), {0, "127.0.0.1:1"})["field"],
            "parallel.world_size");
}

// A parallel sweep's ranks run one point each (the daemon's gangs): without --sweep-point the
// sweep is refused in common/spec's words, naming `sweep`; a point the sweep does not run, or a
// point without a sweep, likewise. All before the device or the rendezvous is touched.
TEST(RankFlagsTest, ParallelSweepNeedsItsPoint) {
  const std::string sweep = R"(, "sweep": {"variable": "SEQ_LEN", "values": [8, 16]})";
  const std::string parallel_sweep = TinySpec(std::string(R"({"worldSize": 2})") + sweep);
  const nlohmann::json missing = RefusedRun(parallel_sweep, {0, "127.0.0.1:1"});
  EXPECT_EQ(missing["field"], spec_rules::kSweepField);
  EXPECT_EQ(missing["message"], spec_rules::kParallelSweepNeedsPointMessage);
  const nlohmann::json wrong =
      RefusedRun(parallel_sweep, {0, "127.0.0.1:1"}, spec_rules::SweepPoint{1, 8});
  EXPECT_EQ(wrong["field"], spec_rules::kSweepField);
  EXPECT_EQ(wrong["message"], "--sweep-point 1:8 is not a point of this spec's sweep");
  EXPECT_EQ(RefusedRun(parallel_sweep, {0, "127.0.0.1:1"}, spec_rules::SweepPoint{2, 8})["field"],
            spec_rules::kSweepField);
  const nlohmann::json no_sweep =
      RefusedRun(TinySpec(R"({"worldSize": 2})"), {0, "127.0.0.1:1"}, spec_rules::SweepPoint{0, 8});
  EXPECT_EQ(no_sweep["message"], "--sweep-point 0:8 runs a point of a sweep; this spec has none");
}

TEST(RankFlagsTest, ParsesRendezvousAddresses) {
  const RendezvousAddress address = ParseRendezvous("node-3.local:29500");
  EXPECT_EQ(address.host, "node-3.local");
  EXPECT_EQ(address.port, 29500);
  EXPECT_EQ(ParseRendezvous("[::1]:7").host, "::1");
  for (const char* bad : {"", "host", ":29500", "host:", "host:0", "host:65536", "host:12x"}) {
    EXPECT_THROW(ParseRendezvous(bad), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace vramlab::worker
