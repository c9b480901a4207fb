// The supervisor with real processes: /bin/sh scripts stand in for misbehaving workers, so every
// failure mode is exercised without LibTorch (the real worker's faults are covered end to end in
// tests/daemon/daemon_faults_test.cc).
#include "server/supervise/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

class RecordingListener : public SupervisorListener {
 public:
  void OnWorkerStarted(const std::string& id, int rank, int pid) override {
    absl::MutexLock lock(&mu_);
    if (rank == 0) pids_[id] = pid;
    rank_pids_[id].push_back(pid);
  }
  void OnRankExited(const std::string& id, const RankEnd& end) override {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(verdicts_.contains(id)) << "a rank of " << id << " reported after the run";
    rank_ends_[id].push_back(end);
  }
  void OnWorkerEvent(const std::string& id, vramlab::v1::WorkerEvent event) override {
    absl::MutexLock lock(&mu_);
    events_[id].push_back(std::move(event));
  }
  void OnWorkerExited(const std::string& id, const ExitVerdict& verdict) override {
    absl::MutexLock lock(&mu_);
    verdicts_[id] = verdict;
  }
  std::optional<ExitVerdict> WaitVerdict(const std::string& id, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return verdicts_.contains(id); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) return std::nullopt;
    return verdicts_[id];
  }
  std::vector<vramlab::v1::WorkerEvent> Events(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return events_[id];
  }
  bool Started(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return pids_.contains(id);
  }
  std::vector<int> RankPids(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return rank_pids_[id];
  }
  std::vector<RankEnd> RankEnds(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return rank_ends_[id];
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> pids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<int>> rank_pids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<RankEnd>> rank_ends_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<vramlab::v1::WorkerEvent>> events_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, ExitVerdict> verdicts_ ABSL_GUARDED_BY(mu_);
};

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/supervisor-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    limits_.max_event_line_bytes = 1 << 20;
    limits_.max_events_per_second = 2000;
    limits_.max_log_bytes = 4096;
    limits_.cancel_grace_period = std::chrono::milliseconds(300);
  }
  void TearDown() override {
    supervisor_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartSupervisor(std::shared_ptr<GpuMemoryReader> gpu_reader = nullptr) {
    supervisor_ = std::make_unique<Supervisor>(limits_, &listener_, std::move(gpu_reader));
    ASSERT_TRUE(supervisor_->Start().ok());
  }
  LaunchRequest Script(const std::string& id, const std::string& script, int time_limit = 30) {
    LaunchRequest request;
    request.experiment_id = id;
    request.ranks.resize(1);
    request.ranks[0].path = "/bin/sh";
    request.ranks[0].args = {"-c", script};
    request.ranks[0].env = EnvironmentWith({"CUDA_VISIBLE_DEVICES=7", "PYTORCH_CUDA_ALLOC_CONF"});
    request.log_path = dir_ + "/" + id + ".log";
    request.time_limit_seconds = time_limit;
    return request;
  }
  // A parallel launch: rank r runs scripts[r], with RANK=r in its environment.
  LaunchRequest Ranks(const std::string& id, const std::vector<std::string>& scripts,
                      int time_limit = 30) {
    LaunchRequest request = Script(id, "", time_limit);
    request.ranks.clear();
    for (size_t r = 0; r < scripts.size(); ++r) {
      SpawnRequest spawn;
      spawn.path = "/bin/sh";
      spawn.args = {"-c", scripts[r]};
      spawn.env = EnvironmentWith({"RANK=" + std::to_string(r)});
      request.ranks.push_back(spawn);
    }
    return request;
  }
  ExitVerdict RunRanks(const std::string& id, const std::vector<std::string>& scripts) {
    supervisor_->Launch(Ranks(id, scripts));
    auto verdict = listener_.WaitVerdict(id, absl::Seconds(20));
    EXPECT_TRUE(verdict.has_value()) << id << " did not finish";
    return verdict.value_or(ExitVerdict{});
  }
  ExitVerdict Run(const std::string& id, const std::string& script, int time_limit = 30) {
    supervisor_->Launch(Script(id, script, time_limit));
    auto verdict = listener_.WaitVerdict(id, absl::Seconds(20));
    EXPECT_TRUE(verdict.has_value()) << id << " did not finish";
    return verdict.value_or(ExitVerdict{});
  }
  std::string ReadLog(const std::string& id) {
    std::ifstream in(dir_ + "/" + id + ".log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
  WorkerLimits limits_;
  RecordingListener listener_;
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(SupervisorTest, WellBehavedWorkerSucceedsWithEventsEnvironmentAndLog) {
  StartSupervisor();
  ExitVerdict verdict = Run("ok", R"(
    echo "{\"notice\":{\"message\":\"gpu=$CUDA_VISIBLE_DEVICES conf=${PYTORCH_CUDA_ALLOC_CONF-unset}\"}}" >&3
    echo 'human log line' >&2
    echo '{"report":{"finalLoss":1.5}}' >&3
    exit 0)");
  EXPECT_EQ(verdict.state, Experiment::SUCCEEDED) << verdict.reason;
  auto events = listener_.Events("ok");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].notice().message(), "gpu=7 conf=unset");
  EXPECT_DOUBLE_EQ(events[1].report().final_loss(), 1.5);
  EXPECT_EQ(ReadLog("ok"), "human log line\n");
}

TEST_F(SupervisorTest, LogIsCappedAndTheRestDrained) {
  StartSupervisor();
  ExitVerdict verdict = Run("chatty", R"(
    head -c 200000 /dev/zero | tr '\0' x >&2
    echo '{"report":{}}' >&3)");
  EXPECT_EQ(verdict.state, Experiment::SUCCEEDED) << verdict.reason;
  std::string log = ReadLog("chatty");
  EXPECT_LT(log.size(), 4096u + 100u);
  EXPECT_THAT(log, HasSubstr("[vramlabd: log truncated at 4096 bytes]"));
}

TEST_F(SupervisorTest, InvalidJsonUnknownFieldAndHugeLineKillTheWorker) {
  StartSupervisor();
  ExitVerdict garbage = Run("garbage", "echo 'this is not json' >&3; sleep 30");
  EXPECT_EQ(garbage.state, Experiment::FAILED);
  EXPECT_THAT(garbage.reason, HasSubstr("worker killed: wrote an invalid event line"));
  ExitVerdict unknown = Run("unknown", R"(echo '{"noSuchField":1}' >&3; sleep 30)");
  EXPECT_THAT(unknown.reason, HasSubstr("invalid event line"));
  ExitVerdict huge = Run("huge", "head -c 3000000 /dev/zero | tr '\\0' a >&3; sleep 30");
  EXPECT_THAT(huge.reason, HasSubstr("an event line exceeded 1048576 bytes"));
  EXPECT_TRUE(huge.abnormal);
}

TEST_F(SupervisorTest, FloodIsKilledWhileAnotherWorkerRunsUndisturbed) {
  StartSupervisor();
  supervisor_->Launch(Script("flood", R"(while :; do echo '{"notice":{}}'; done >&3)"));
  ExitVerdict quiet = Run("quiet", R"(
    for i in 1 2 3 4 5; do echo '{"notice":{}}' >&3; sleep 0.1; done
    echo '{"report":{}}' >&3)");
  EXPECT_EQ(quiet.state, Experiment::SUCCEEDED) << quiet.reason;
  EXPECT_EQ(listener_.Events("quiet").size(), 6u);
  auto flood = listener_.WaitVerdict("flood", absl::Seconds(20));
  ASSERT_TRUE(flood.has_value());
  EXPECT_THAT(flood->reason, HasSubstr("flooded its event stream"));
  // The flood was cut off at the rate limit, not read without end.
  EXPECT_LE(listener_.Events("flood").size(), 2001u * 2);
}

TEST_F(SupervisorTest, TimeLimitThenSigkillForAWorkerIgnoringSigterm) {
  StartSupervisor();
  auto start = std::chrono::steady_clock::now();
  ExitVerdict verdict = Run("stubborn", "trap '' TERM; while :; do sleep 0.05; done", 1);
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  EXPECT_EQ(verdict.reason, "timed out: time limit of 1 s exceeded");
  EXPECT_EQ(verdict.exit_status, -SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(SupervisorTest, CancelRunningAndPending) {
  StartSupervisor();
  supervisor_->Launch(Script("running", "sleep 30"));
  for (int i = 0; i < 200 && !listener_.Started("running"); ++i) usleep(10000);
  supervisor_->Cancel("running");
  auto verdict = listener_.WaitVerdict("running", absl::Seconds(10));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->state, Experiment::CANCELLED);
  EXPECT_EQ(verdict->exit_status, -SIGTERM);
}

TEST_F(SupervisorTest, CrashAndExecFailure) {
  StartSupervisor();
  ExitVerdict crash = Run("crash", "kill -SEGV $$");
  EXPECT_THAT(crash.reason, HasSubstr("killed by signal 11"));
  LaunchRequest missing = Script("missing", "");
  missing.ranks[0].path = "/nonexistent/vramlab-worker";
  supervisor_->Launch(missing);
  auto verdict = listener_.WaitVerdict("missing", absl::Seconds(10));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_THAT(verdict->reason, HasSubstr("worker could not be started: exec /nonexistent"));
}

TEST_F(SupervisorTest, InterruptAllEndsEveryWorkerInterrupted) {
  StartSupervisor();
  supervisor_->Launch(Script("one", "sleep 30"));
  supervisor_->Launch(Script("two", "trap '' TERM; sleep 30"));
  for (int i = 0; i < 200 && !(listener_.Started("one") && listener_.Started("two")); ++i) {
    usleep(10000);
  }
  supervisor_->InterruptAll();
  EXPECT_TRUE(supervisor_->WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(listener_.WaitVerdict("one", absl::Seconds(1))->state, Experiment::INTERRUPTED);
  EXPECT_EQ(listener_.WaitVerdict("two", absl::Seconds(1))->state, Experiment::INTERRUPTED);
}

TEST_F(SupervisorTest, EveryRankSucceedsAndItsEventsCarryItsRank) {
  StartSupervisor();
  const std::string rank_script = R"(
    echo "{\"notice\":{\"message\":\"I am $RANK\"}}" >&3
    echo "rank $RANK log" >&2
    echo '{"report":{"finalLoss":2.5}}' >&3)";
  ExitVerdict verdict = RunRanks("pair", {rank_script, rank_script});
  EXPECT_EQ(verdict.state, Experiment::SUCCEEDED) << verdict.reason;
  EXPECT_FALSE(verdict.deciding_rank.has_value());
  EXPECT_EQ(listener_.RankPids("pair").size(), 2u);
  int notices[2] = {0, 0};
  for (const auto& event : listener_.Events("pair")) {
    ASSERT_GE(event.rank(), 0);
    ASSERT_LT(event.rank(), 2);
    if (event.has_notice()) {
      EXPECT_EQ(event.notice().message(), "I am " + std::to_string(event.rank()));
      ++notices[event.rank()];
    }
  }
  EXPECT_EQ(notices[0], 1);
  EXPECT_EQ(notices[1], 1);
  auto ends = listener_.RankEnds("pair");
  ASSERT_EQ(ends.size(), 2u);
  for (const RankEnd& end : ends) {
    EXPECT_EQ(end.verdict.state, Experiment::SUCCEEDED);
    EXPECT_EQ(end.state_reason, "");
  }
  EXPECT_THAT(ReadLog("pair"), HasSubstr("rank 0 log"));
  EXPECT_THAT(ReadLog("pair"), HasSubstr("rank 1 log"));
}

TEST_F(SupervisorTest, OneRanksOomDecidesAndStopsTheOthers) {
  StartSupervisor();
  auto start = std::chrono::steady_clock::now();
  ExitVerdict verdict = RunRanks(
      "oom", {"sleep 30", "sleep 30", R"(echo '{"oom":{"message":"out of memory"}}' >&3; exit 3)"});
  EXPECT_EQ(verdict.state, Experiment::OOM);
  EXPECT_EQ(verdict.reason, "rank 2 ran out of memory");
  ASSERT_TRUE(verdict.deciding_rank.has_value());
  EXPECT_EQ(*verdict.deciding_rank, 2);
  EXPECT_EQ(verdict.exit_status, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  auto ends = listener_.RankEnds("oom");
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0].rank, 2);
  EXPECT_EQ(ends[0].verdict.state, Experiment::OOM);
  for (size_t i = 1; i < ends.size(); ++i) {
    EXPECT_EQ(ends[i].verdict.exit_status, -SIGTERM);
    EXPECT_EQ(ends[i].state_reason, "stopped: rank 2 ran out of memory");
  }
  // No process of the run is left.
  for (int pid : listener_.RankPids("oom")) EXPECT_NE(kill(pid, 0), 0) << pid;
}

TEST_F(SupervisorTest, ARankKilledBySignalDecidesOverOneThatFailsAfterIt) {
  StartSupervisor();
  // Rank 0 fails with an internal error as soon as rank 1 is gone (as a collective would);
  // both end within one pass, and the killed rank is the cause.
  const std::string marker = dir_ + "/rank1-dying";
  ExitVerdict verdict =
      RunRanks("crash", {"while [ ! -e " + marker + " ]; do sleep 0.001; done; sleep 0.02; exit 1",
                         "touch " + marker + "; kill -KILL $$"});
  EXPECT_EQ(verdict.state, Experiment::FAILED);
  ASSERT_TRUE(verdict.deciding_rank.has_value());
  EXPECT_EQ(*verdict.deciding_rank, 1);
  EXPECT_THAT(verdict.reason, HasSubstr("rank 1: worker crashed: killed by signal 9"));
  EXPECT_EQ(verdict.exit_status, -SIGKILL);
}

TEST_F(SupervisorTest, ATimeLimitIsDecidedByARankAndEndsEveryRank) {
  StartSupervisor();
  supervisor_->Launch(Ranks("slow", {"sleep 30", "sleep 30"}, /*time_limit=*/1));
  auto verdict = listener_.WaitVerdict("slow", absl::Seconds(10));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->state, Experiment::FAILED);
  ASSERT_TRUE(verdict->deciding_rank.has_value());
  const std::string rank = std::to_string(*verdict->deciding_rank);
  EXPECT_EQ(verdict->reason, "rank " + rank + ": timed out: time limit of 1 s exceeded");
  auto ends = listener_.RankEnds("slow");
  ASSERT_EQ(ends.size(), 2u);
  for (const RankEnd& end : ends) EXPECT_THAT(end.state_reason, HasSubstr("timed out"));
  for (int pid : listener_.RankPids("slow")) EXPECT_NE(kill(pid, 0), 0) << pid;
}

TEST_F(SupervisorTest, CancelStopsEveryRankWithoutADecidingRank) {
  StartSupervisor();
  supervisor_->Launch(Ranks("cancel", {"sleep 30", "trap '' TERM; sleep 30"}));
  for (int i = 0; i < 200 && listener_.RankPids("cancel").size() < 2; ++i) usleep(10000);
  supervisor_->Cancel("cancel");
  auto verdict = listener_.WaitVerdict("cancel", absl::Seconds(10));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->state, Experiment::CANCELLED);
  EXPECT_FALSE(verdict->deciding_rank.has_value());
  auto ends = listener_.RankEnds("cancel");
  ASSERT_EQ(ends.size(), 2u);
  for (const RankEnd& end : ends) EXPECT_EQ(end.state_reason, "cancelled while running");
  for (int pid : listener_.RankPids("cancel")) EXPECT_NE(kill(pid, 0), 0) << pid;
}

TEST_F(SupervisorTest, ARankThatCannotStartFailsTheRun) {
  StartSupervisor();
  LaunchRequest request = Ranks("missing-rank", {"sleep 30", "sleep 30"});
  request.ranks[1].path = "/nonexistent/vramlab-worker";
  supervisor_->Launch(request);
  auto verdict = listener_.WaitVerdict("missing-rank", absl::Seconds(10));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->state, Experiment::FAILED);
  EXPECT_THAT(verdict->reason, HasSubstr("rank 1: worker could not be started: exec /nonexistent"));
  ASSERT_TRUE(verdict->deciding_rank.has_value());
  EXPECT_EQ(*verdict->deciding_rank, 1);
  auto ends = listener_.RankEnds("missing-rank");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_THAT(ends[0].state_reason, HasSubstr("stopped: rank 1: worker could not be started"));
  // Rank 0 had started: it is gone.
  for (int pid : listener_.RankPids("missing-rank")) EXPECT_NE(kill(pid, 0), 0) << pid;
}

// Lists pid 1 (never a job's) and whichever pids the test names, as the driver lists processes.
class ListedPidsReader : public GpuMemoryReader {
 public:
  absl::StatusOr<GpuMemoryReading> Read(const std::string& gpu_uuid) override {
    absl::MutexLock lock(&mu_);
    GpuMemoryReading reading;
    reading.total_bytes = 80LL << 30;
    reading.used_bytes = 1LL << 30;
    reading.processes.push_back({1, 999LL << 20});
    for (pid_t pid : pids_) reading.processes.push_back({pid, 123LL << 20});
    uuids_.push_back(gpu_uuid);
    return reading;
  }
  void List(pid_t pid) {
    absl::MutexLock lock(&mu_);
    pids_.push_back(pid);
  }
  std::vector<std::string> Uuids() {
    absl::MutexLock lock(&mu_);
    return uuids_;
  }

 private:
  absl::Mutex mu_;
  std::vector<pid_t> pids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> uuids_ ABSL_GUARDED_BY(mu_);
};

LaunchRequest OnGpu(LaunchRequest request) {
  request.command = true;
  request.gpus = {{.uuid = "GPU-test", .name = "Test GPU"}};
  request.sample_interval_ms = 20;
  return request;
}

TEST_F(SupervisorTest, ACommandThatSaysNothingIsReadFromTheDriver) {
  auto reader = std::make_shared<ListedPidsReader>();
  StartSupervisor(reader);
  supervisor_->Launch(OnGpu(Script("silent", "sleep 1")));
  for (int i = 0; i < 200 && !listener_.Started("silent"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(listener_.Started("silent"));
  reader->List(listener_.RankPids("silent")[0]);
  auto verdict = listener_.WaitVerdict("silent", absl::Seconds(20));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->state, Experiment::SUCCEEDED) << verdict->reason;
  int samples = 0, listed = 0;
  std::optional<vramlab::v1::FinalReport> report;
  for (const auto& event : listener_.Events("silent")) {
    EXPECT_EQ(event.rank(), 0);
    if (event.has_sample()) {
      EXPECT_FALSE(report.has_value()) << "a sample after the report";
      ++samples;
      // pid 1's 999 MiB is never the job's.
      EXPECT_TRUE(event.sample().allocated_bytes() == 0 ||
                  event.sample().allocated_bytes() == (123LL << 20))
          << event.sample().allocated_bytes();
      if (event.sample().allocated_bytes() > 0) ++listed;
      EXPECT_EQ(event.sample().device_used_bytes(), 1LL << 30);
    }
    if (event.has_report()) report = event.report();
  }
  // One second at most every 50 ms, the first reading at the start.
  EXPECT_GE(samples, 5);
  EXPECT_LE(samples, 22);
  EXPECT_GE(listed, 1);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->measured_by(), vramlab::v1::FinalReport::GPU_DRIVER_PROCESSES);
  EXPECT_EQ(report->anatomy().peak_device_used_bytes(), 123LL << 20);
  EXPECT_EQ(report->device_name(), "Test GPU");
  for (const std::string& uuid : reader->Uuids()) EXPECT_EQ(uuid, "GPU-test");
}

TEST_F(SupervisorTest, ACommandWhoseProbeSpeaksIsNotReadFromTheDriverAfterward) {
  auto reader = std::make_shared<ListedPidsReader>();
  StartSupervisor(reader);
  supervisor_->Launch(OnGpu(Script("speaks", R"(
    sleep 0.4
    echo '{"notice":{"message":"probe"}}' >&3
    sleep 0.4)")));
  auto spoke = listener_.WaitVerdict("speaks", absl::Seconds(20));
  ASSERT_TRUE(spoke.has_value());
  EXPECT_EQ(spoke->state, Experiment::SUCCEEDED) << spoke->reason;
  const auto events = listener_.Events("speaks");
  int samples = 0;
  bool probe_seen = false;
  for (const auto& event : events) {
    if (event.has_notice() && event.notice().message() == "probe") probe_seen = true;
    if (event.has_sample()) {
      EXPECT_FALSE(probe_seen) << "the daemon read the driver after the probe spoke";
      ++samples;
    }
    EXPECT_FALSE(event.has_report()) << "the daemon reported for a job whose probe speaks";
  }
  EXPECT_TRUE(probe_seen);
  EXPECT_GE(samples, 2);
}

TEST_F(SupervisorTest, ACommandOnACpuSlotOrAWorkerIsNeverReadFromTheDriver) {
  auto reader = std::make_shared<ListedPidsReader>();
  StartSupervisor(reader);
  LaunchRequest cpu = OnGpu(Script("cpu-slot", "sleep 0.3"));
  cpu.gpus = {{.uuid = "", .name = "cpu"}};
  LaunchRequest worker = Script("worker", "sleep 0.3");
  worker.gpus = {{.uuid = "GPU-test", .name = "Test GPU"}};  // not a command: ignored
  supervisor_->Launch(cpu);
  supervisor_->Launch(worker);
  for (const char* id : {"cpu-slot", "worker"}) {
    auto verdict = listener_.WaitVerdict(id, absl::Seconds(20));
    ASSERT_TRUE(verdict.has_value()) << id;
    EXPECT_TRUE(listener_.Events(id).empty()) << id;
  }
  EXPECT_TRUE(reader->Uuids().empty());
}

}  // namespace
}  // namespace vramlab::server
