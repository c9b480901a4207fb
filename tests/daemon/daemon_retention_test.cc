// Deletion and retention through a real daemon: the retention policy by age and by size (oldest
// finished first, never a queued or running one), the store giving the space back, the metrics,
// and a daemon killed (SIGKILL) in either step of a deletion: nothing half-deleted, nothing else
// lost. A stand-in worker (tests/support/stand_in_worker.h) makes the experiments.
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/metrics/exposition_text.h"
#include "tests/metrics/raw_http_client.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/stand_in_worker.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;
namespace fs = std::filesystem;

class DaemonRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_ = WriteStandInWorker();
    dir_ = fs::path(worker_).parent_path().string();
    fault_file_ = dir_ + "/kill-during-delete";
  }
  void TearDown() override {
    daemon_.reset();
    fs::remove_all(dir_);
  }
  std::vector<std::string> BaseFlags() const {
    return {"--cpu-slots=2",
            "--worker-path=" + worker_,
            "--cancel-grace-period=1s",
            "--max-worker-events-per-second=1000000",
            "--retention-interval=200ms",
            "--shutdown-grace-period=0s",
            "--kill-during-delete-while-exists=" + fault_file_};
  }
  void StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = BaseFlags();
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto daemon = DaemonHarness::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
  }
  void RestartWith(std::vector<std::string> extra) {
    std::vector<std::string> flags = BaseFlags();
    flags.insert(flags.end(), extra.begin(), extra.end());
    ASSERT_TRUE(daemon_->Restart(flags).ok()) << daemon_->ReadLog();
    stub_ = daemon_->NewStub();
  }
  std::string Run(const std::string& name) {
    vramlab::v1::ExperimentSpec spec = TinySpec();
    spec.set_name(name);
    auto submitted = Submit(*stub_, spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    auto done = WaitForFinalState(*stub_, submitted->id(), absl::Seconds(60));
    EXPECT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
    return submitted->id();
  }
  std::string Queue(const std::string& name, Experiment::State wait_for) {
    vramlab::v1::ExperimentSpec spec = TinySpec();
    spec.set_name(name);
    auto submitted = Submit(*stub_, spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    EXPECT_TRUE(WaitForState(*stub_, submitted->id(), wait_for).ok());
    return submitted->id();
  }
  absl::StatusOr<Experiment> Get(const std::string& id) {
    grpc::ClientContext context;
    vramlab::v1::GetExperimentRequest request;
    request.set_id(id);
    Experiment experiment;
    grpc::Status status = stub_->GetExperiment(&context, request, &experiment);
    if (!status.ok()) return ToAbsl(status);
    return experiment;
  }
  grpc::Status Delete(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    vramlab::v1::DeleteExperimentRequest request;
    request.set_id(id);
    vramlab::v1::DeleteExperimentResponse response;
    return stub_->DeleteExperiment(&context, request, &response);
  }
  // What a client can see of an experiment: its record and every event, serialized, and whether
  // its directory exists.
  std::string Fingerprint(const std::string& id) {
    auto experiment = Get(id);
    if (!experiment.ok()) return std::string(experiment.status().message());
    auto events = WatchAll(*stub_, id, 0, absl::Seconds(30));
    std::string out = experiment->SerializeAsString();
    if (!events.ok()) return out + "events: " + std::string(events.status().message());
    for (const auto& event : *events) out += event.SerializeAsString();
    out += fs::exists(fs::path(daemon_->data_dir()) / "experiments" / id) ? "dir" : "no dir";
    return out;
  }
  size_t EventCount(const std::string& id) {
    auto events = WatchAll(*stub_, id, 0, absl::Seconds(30));
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? events->size() : 0;
  }
  std::string Scrape() {
    return BodyOf(TimedRequest(daemon_->metrics_port(), "GET /metrics HTTP/1.0\r\n\r\n").response);
  }
  double StoreBytes() {
    const std::string text = Scrape();
    return SeriesValue(text, "vramlab_store_size_bytes{part=\"database\"}").value_or(-1) +
           SeriesValue(text, "vramlab_store_size_bytes{part=\"files\"}").value_or(-1);
  }
  // Waits until `id` is deleted (NOT_FOUND "was deleted") or `timeout` passes.
  bool WaitDeleted(const std::string& id, absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      auto experiment = Get(id);
      if (absl::IsNotFound(experiment.status())) {
        return absl::StrContains(experiment.status().message(), "was deleted");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }
  void ArmKill(const std::string& stage) { std::ofstream(fault_file_) << stage << "\n"; }
  void DisarmKill() { fs::remove(fault_file_); }
  // The daemon killed itself (a zombie until the harness reaps it, so that it can restart).
  void ExpectDaemonDied(const grpc::Status& status) {
    EXPECT_FALSE(status.ok());
    const std::string stat_path = absl::StrCat("/proc/", daemon_->pid(), "/stat");
    bool dead = false;
    for (int i = 0; i < 100 && !dead; ++i) {
      std::ifstream in(stat_path);
      std::string pid, comm, state;
      in >> pid >> comm >> state;
      dead = state == "Z" || !in;
      if (!dead) absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_TRUE(dead) << "the daemon should have killed itself in the deletion";
    ASSERT_TRUE(daemon_->Kill().ok());
  }

  std::string worker_;
  std::string dir_;
  std::string fault_file_;
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(DaemonRetentionTest, KilledBeforeTheCommitKeepsTheWholeExperiment) {
  StartDaemon();
  const std::vector<std::string> ids = {Run("events-1"), Run("events-2"), Run("events-3")};
  std::map<std::string, std::string> before;
  for (const std::string& id : ids) before[id] = Fingerprint(id);
  EXPECT_GT(EventCount(ids[1]), 3000u);
  ArmKill("before-commit");
  ExpectDaemonDied(Delete(ids[1]));
  DisarmKill();
  RestartWith({});
  for (const std::string& id : ids) EXPECT_EQ(Fingerprint(id), before[id]) << id;
}

TEST_F(DaemonRetentionTest, KilledBeforeTheFilesFinishesTheDeletionAtStart) {
  StartDaemon();
  const std::vector<std::string> ids = {Run("events-1"), Run("events-2"), Run("events-3")};
  std::map<std::string, std::string> before;
  for (const std::string& id : ids) before[id] = Fingerprint(id);
  ArmKill("before-files");
  ExpectDaemonDied(Delete(ids[1]));
  DisarmKill();
  const fs::path files = fs::path(daemon_->data_dir()) / "experiments" / ids[1];
  // Killed between the two steps: the record is gone, the files are still there.
  EXPECT_TRUE(fs::exists(files));
  RestartWith({});
  EXPECT_FALSE(fs::exists(files));
  EXPECT_THAT(daemon_->ReadLog(), HasSubstr("finished deleting " + ids[1]));
  auto deleted = Get(ids[1]);
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(WatchAll(*stub_, ids[1], 0, absl::Seconds(5)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Fingerprint(ids[0]), before[ids[0]]);
  EXPECT_EQ(Fingerprint(ids[2]), before[ids[2]]);
}

// A real SIGKILL from outside at moments spread over a retention pass that deletes everything:
// after each restart every experiment is either exactly as it was or wholly gone.
TEST_F(DaemonRetentionTest, KilledAtAnyMomentOfARetentionPassLeavesWholeExperiments) {
  StartDaemon();
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Run("events-" + std::to_string(i)));
  std::map<std::string, std::string> before;
  for (const std::string& id : ids) before[id] = Fingerprint(id);
  size_t deleted = 0;
  int kills = 0;
  for (int delay_ms = 20; deleted < ids.size() && kills < 30; delay_ms += 15, ++kills) {
    ASSERT_TRUE(daemon_->Stop().ok());
    RestartWith({"--max-store-bytes=1", "--retention-interval=100ms"});
    absl::SleepFor(absl::Milliseconds(delay_ms));
    ASSERT_TRUE(daemon_->Kill().ok());
    RestartWith({});
    deleted = 0;
    for (const std::string& id : ids) {
      auto experiment = Get(id);
      if (experiment.ok()) {
        EXPECT_EQ(Fingerprint(id), before[id]) << id << " after a kill at " << delay_ms << " ms";
        continue;
      }
      ++deleted;
      EXPECT_EQ(experiment.status().message(), "experiment " + id + " was deleted");
      EXPECT_FALSE(fs::exists(fs::path(daemon_->data_dir()) / "experiments" / id)) << id;
      EXPECT_EQ(WatchAll(*stub_, id, 0, absl::Seconds(5)).status().code(),
                absl::StatusCode::kNotFound);
    }
  }
  EXPECT_EQ(deleted, ids.size()) << "after " << kills << " kills";
  std::printf("%d kills during retention passes until all %zu experiments were deleted\n", kills,
              ids.size());
}

TEST_F(DaemonRetentionTest, AgeDeletesFinishedOnesNeverQueuedOrRunning) {
  // 0.00003 days: 2.6 s.
  StartDaemon({"--retain-days=0.00003"});
  const std::string running = Queue("hang-running", Experiment::RUNNING);
  const std::string finished = Run("ok");
  const absl::Time ended = absl::Now();
  ASSERT_TRUE(WaitDeleted(finished));
  EXPECT_GE(absl::Now() - ended, absl::Seconds(2));
  EXPECT_EQ(Get(running)->state(), Experiment::RUNNING);
  EXPECT_EQ(SeriesValue(Scrape(), "vramlab_experiments_deleted_total{reason=\"retention_age\"}"),
            1);
  EXPECT_THAT(daemon_->ReadLog(),
              HasSubstr("retention deleted " + finished + " (older than --retain-days)"));
}

TEST_F(DaemonRetentionTest, SizeBoundDeletesOldestFinishedFirstAndReclaimsTheSpace) {
  StartDaemon();
  const std::vector<std::string> ids = {Run("events-1"), Run("events-2"), Run("events-3"),
                                        Run("events-4")};
  // The size metric is refreshed every retention interval.
  absl::SleepFor(absl::Milliseconds(600));
  const double total = StoreBytes();
  ASSERT_GT(total, 0);
  // Just over the bound: deleting the oldest is enough.
  ASSERT_TRUE(daemon_->Stop().ok());
  RestartWith({absl::StrCat("--max-store-bytes=", static_cast<int64_t>(total) - 1)});
  ASSERT_TRUE(WaitDeleted(ids[0]));
  absl::SleepFor(absl::Milliseconds(600));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_TRUE(Get(ids[i]).ok()) << ids[i];
  EXPECT_LE(StoreBytes(), total - 1);
  EXPECT_EQ(SeriesValue(Scrape(), "vramlab_experiments_deleted_total{reason=\"retention_size\"}"),
            1);

  // A bound nothing fits: every finished one goes, the running and the queued one stay (the
  // interrupted one is requeued at the restart and runs again).
  ASSERT_TRUE(daemon_->Stop().ok());
  RestartWith({"--cpu-slots=1"});
  const std::string running = Queue("hang-running", Experiment::RUNNING);
  const std::string queued = Queue("queued", Experiment::QUEUED);
  const fs::path database = fs::path(daemon_->data_dir()) / "vramlab.db";
  ASSERT_TRUE(daemon_->Stop().ok());
  const auto file_before = fs::file_size(database);
  RestartWith({"--cpu-slots=1", "--requeue-interrupted", "--max-store-bytes=1"});
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_TRUE(WaitDeleted(ids[i])) << ids[i];
  // Several more passes: still there.
  absl::SleepFor(absl::Seconds(1));
  auto still_running = Get(running);
  ASSERT_TRUE(still_running.ok()) << still_running.status();
  EXPECT_EQ(still_running->state(), Experiment::RUNNING);
  auto still_queued = Get(queued);
  ASSERT_TRUE(still_queued.ok()) << still_queued.status();
  EXPECT_EQ(still_queued->state(), Experiment::QUEUED);
  EXPECT_EQ(SeriesValue(Scrape(), "vramlab_experiments_deleted_total{reason=\"retention_size\"}"),
            3);
  ASSERT_TRUE(daemon_->Stop().ok());
  const auto file_after = fs::file_size(database);
  // Three experiments of 3000 events each are gone: the file shrank to a fraction.
  EXPECT_LT(file_after * 2, file_before) << file_before << " -> " << file_after;
  std::printf(
      "vramlab.db: %ju bytes with 3 experiments of 3000 events (and 2 small), %ju after deleting "
      "the 3\n",
      static_cast<uintmax_t>(file_before), static_cast<uintmax_t>(file_after));
}

}  // namespace
}  // namespace vramlab::testing
