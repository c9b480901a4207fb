// A command of several processes (spec.command with parallel.world_size >= 2, docs/COMMANDS.md)
// against a real daemon on two CPU slots: testdata/ddp_train.py, a torchrun-style script that
// joins a Gloo process group from the environment the daemon gives each rank (RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and trains with DistributedDataParallel. Each rank's
// probe reports as that rank; a rank that fails decides the run and stops the other; cancel stops
// every rank; the names the daemon sets per rank are refused in the spec's env.
#include "tests/command/command_fixture.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using vramlab::v1::Experiment;

// The "rank R name value" lines ddp_train.py prints, as rank -> name -> value.
std::map<int, std::map<std::string, std::string>> RankLines(const std::string& log) {
  std::map<int, std::map<std::string, std::string>> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    int rank = 0;
    if (fields.size() == 4 && fields[0] == "rank" && absl::SimpleAtoi(fields[1], &rank)) {
      lines[rank][fields[2]] = fields[3];
    }
  }
  return lines;
}

class DaemonCommandRanksTest : public DaemonCommandTest {
 protected:
  vramlab::v1::ExperimentSpec Ranks(int world_size, std::vector<std::string> args) const {
    vramlab::v1::ExperimentSpec spec = CommandOf("ddp_train.py", std::move(args));
    spec.mutable_parallel()->set_world_size(world_size);
    return spec;
  }

  // Waits until the log names the pid of every one of `ranks` ranks.
  static std::map<int, pid_t> WaitForRankPids(const DaemonHarness& daemon, const std::string& id,
                                              int ranks) {
    std::map<int, pid_t> pids;
    for (int i = 0; i < 600 && static_cast<int>(pids.size()) < ranks; ++i) {
      pids.clear();
      for (const auto& [rank, facts] : RankLines(Log(daemon, id))) {
        auto pid = facts.find("pid");
        if (pid != facts.end()) pids[rank] = static_cast<pid_t>(std::stol(pid->second));
      }
      if (static_cast<int>(pids.size()) < ranks) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    return pids;
  }
};

TEST_F(DaemonCommandRanksTest, TorchrunStyleRanksTrainTogetherEachReportingAsItsRank) {
  auto daemon = StartDaemon(/*cpu_slots=*/2);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  auto submitted = Submit(*stub, Ranks(2, {"--steps", "3"}), kBob);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto done = WaitForFinalState(*stub, submitted->id(), absl::Seconds(300), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  const std::string log = Log(**daemon, submitted->id());
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason() << "\n" << log;
  EXPECT_EQ(done->slots_size(), 2);

  // Each rank got torchrun's environment: its own rank, one rendezvous for both.
  auto lines = RankLines(log);
  ASSERT_EQ(lines.size(), 2u) << log;
  for (int r = 0; r < 2; ++r) {
    const auto& facts = lines[r];
    EXPECT_EQ(facts.at("env_RANK"), std::to_string(r));
    EXPECT_EQ(facts.at("env_LOCAL_RANK"), std::to_string(r));
    EXPECT_EQ(facts.at("env_WORLD_SIZE"), "2");
    EXPECT_EQ(facts.at("env_LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(facts.at("env_MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(facts.at("env_TORCHELASTIC_RUN_ID"), submitted->id());
    EXPECT_EQ(facts.at("weights_agree"), "1") << "rank " << r;
  }
  EXPECT_EQ(lines[0].at("env_MASTER_PORT"), lines[1].at("env_MASTER_PORT"));
  EXPECT_NE(lines[0].at("env_MASTER_PORT"), "0");

  // Every rank's probe streamed its own events, marked with its rank.
  auto events = WatchAll(*stub, submitted->id(), 0, absl::Seconds(60), kBob);
  ASSERT_TRUE(events.ok()) << events.status();
  std::map<int, int> started, steps, samples, optimizer_steps;
  for (const auto& event : *events) {
    if (!event.has_worker_event()) continue;
    const auto& worker = event.worker_event();
    const int rank = worker.rank();
    if (worker.has_started()) ++started[rank];
    if (worker.has_sample()) ++samples[rank];
    if (worker.has_step()) {
      EXPECT_EQ(worker.step().step(), steps[rank]) << "rank " << rank;
      ++steps[rank];
    }
    if (worker.has_phase() && worker.phase().phase() == vramlab::v1::OPTIMIZER_STEP &&
        worker.phase().edge() == vramlab::v1::END) {
      ++optimizer_steps[rank];
    }
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(started[r], 1) << "rank " << r;
    EXPECT_GT(samples[r], 0) << "rank " << r;
    EXPECT_EQ(steps[r], 3) << "rank " << r;
    EXPECT_EQ(optimizer_steps[r], 3) << "rank " << r;
  }

  // Each rank's anatomy is what that rank counts itself.
  ASSERT_EQ(done->ranks_size(), 2);
  for (const auto& rank : done->ranks()) {
    SCOPED_TRACE("rank " + std::to_string(rank.rank()));
    const auto& facts = lines[rank.rank()];
    ASSERT_TRUE(rank.has_report());
    const auto& anatomy = rank.report().anatomy();
    EXPECT_EQ(anatomy.weights_bytes(), std::stoll(facts.at("parameter_bytes")));
    EXPECT_EQ(anatomy.gradients_bytes(), std::stoll(facts.at("gradient_bytes")));
    EXPECT_EQ(anatomy.optimizer_state_bytes(), std::stoll(facts.at("optimizer_state_bytes")));
    EXPECT_GT(anatomy.peak_allocated_bytes(), 0);
  }
  EXPECT_EQ(done->report().anatomy().weights_bytes(),
            done->ranks(0).report().anatomy().weights_bytes());
}

TEST_F(DaemonCommandRanksTest, AFailingRankDecidesAndCancelStopsEveryRank) {
  auto daemon = StartDaemon(/*cpu_slots=*/2);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  // Rank 1 exits with code 3 after its first step; rank 0 is sleeping then and is stopped.
  auto failing = Submit(
      *stub, Ranks(2, {"--steps", "100000", "--sleep-per-step", "0.5", "--fail-rank", "1"}), kBob);
  ASSERT_TRUE(failing.ok()) << failing.status();
  auto pids = WaitForRankPids(**daemon, failing->id(), 2);
  ASSERT_EQ(pids.size(), 2u) << Log(**daemon, failing->id());
  auto done = WaitForFinalState(*stub, failing->id(), absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::FAILED) << done->state_reason();
  EXPECT_EQ(done->deciding_rank(), 1);
  EXPECT_EQ(done->state_reason(), "rank 1: command exited with code 3");
  ASSERT_EQ(done->ranks_size(), 2);
  EXPECT_THAT(done->ranks(0).state_reason(), StartsWith("stopped: rank 1"));
  for (const auto& [rank, pid] : pids) EXPECT_TRUE(ProcessGone(pid)) << "rank " << rank;

  auto running = Submit(*stub, Ranks(2, {"--steps", "100000", "--sleep-per-step", "0.5"}), kBob);
  ASSERT_TRUE(running.ok()) << running.status();
  pids = WaitForRankPids(**daemon, running->id(), 2);
  ASSERT_EQ(pids.size(), 2u) << Log(**daemon, running->id());
  ASSERT_TRUE(Cancel(*stub, running->id(), kBob).ok());
  done = WaitForFinalState(*stub, running->id(), absl::Seconds(60), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
  for (const auto& [rank, pid] : pids) {
    EXPECT_TRUE(ProcessGone(pid)) << "rank " << rank << " (pid " << pid << ") outlived cancel";
  }
}

TEST_F(DaemonCommandRanksTest, RankNamesAndShardingWithoutAnEquivalentSpecAreRefused) {
  auto daemon = StartDaemon(/*cpu_slots=*/2);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  vramlab::v1::ExperimentSpec spec = Ranks(2, {});
  spec.mutable_command()->add_env("MASTER_PORT=29500");
  auto refused = Submit(*stub, spec, kBob);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.command.env[0]: MASTER_PORT is set by the daemon for each rank"));
  // A one-process command may set it: it is its own.
  spec = Ranks(1, {});
  spec.mutable_command()->add_env("MASTER_PORT=29500");
  spec.mutable_command()->set_argv(1, jobs_ + "/tiny_train.py");
  spec.mutable_command()->add_argv("--steps");
  spec.mutable_command()->add_argv("1");
  auto accepted = Submit(*stub, spec, kBob);
  EXPECT_TRUE(accepted.ok()) << accepted.status();

  spec = Ranks(2, {});
  spec.mutable_parallel()->set_sharding(vramlab::v1::SHARD_GRADIENTS);
  refused = Submit(*stub, spec, kBob);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.has_equivalent_spec"));

  // More processes than the daemon has slots: this daemon cannot run it, as for the worker.
  refused = Submit(*stub, Ranks(3, {}), kBob);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.parallel.world_size: 3 ranks need one device each"));
}

}  // namespace
}  // namespace vramlab::testing
