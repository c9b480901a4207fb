// The Store's deletions, tombstones and space: a deletion takes the record and every event in one
// transaction, leaves the id unusable, and the freed pages go back to the filesystem; a store made
// without auto_vacuum is converted when opened.
#include <sqlite3.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "server/store/store.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

class StoreDeletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/store-deletion-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static Experiment Finished(int seq) {
    Experiment experiment;
    experiment.set_id("exp-00000" + std::to_string(seq));
    experiment.set_owner("alice");
    experiment.set_state(Experiment::SUCCEEDED);
    experiment.mutable_end_time()->set_seconds(1000 + seq);
    return experiment;
  }
  // Stores `count` events of ~1 KiB for `id`.
  static void AddEvents(Store& store, const std::string& id, int count) {
    std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>> events;
    for (int i = 1; i <= count; ++i) {
      vramlab::v1::ExperimentEvent event;
      event.set_sequence(i);
      event.mutable_state_change()->set_reason(std::string(1024, 'x'));
      events.emplace_back(id, event);
    }
    ASSERT_TRUE(store.AppendEvents(events).ok());
  }
  std::string dir_;
};

TEST_F(StoreDeletionTest, DeleteTakesRecordAndEventsAndKeepsTheIdUsed) {
  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE((*store)->InsertExperiment(seq, Finished(seq)).ok());
    AddEvents(**store, Finished(seq).id(), 200);
  }
  const int64_t before = *(*store)->DatabaseBytes();
  ASSERT_TRUE((*store)->DeleteExperiment("exp-000003").ok());
  ASSERT_TRUE((*store)->DeleteExperiment("exp-000002").ok());
  auto gone = (*store)->GetExperiment("exp-000003");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(gone.status().message(), "experiment exp-000003 was deleted");
  EXPECT_EQ((*store)->GetExperiment("exp-000009").status().message(),
            "experiment exp-000009 not found");
  EXPECT_EQ(*(*store)->MaxEventSequence("exp-000003"), 0);
  EXPECT_EQ(*(*store)->MaxEventSequence("exp-000001"), 200);
  EXPECT_EQ((*store)->DeleteExperiment("exp-000003").code(), absl::StatusCode::kNotFound);
  // The newest was deleted: its seq still counts.
  EXPECT_EQ(*(*store)->MaxSeq(), 3);
  EXPECT_EQ(*(*store)->DeletedIds(), (std::vector<std::string>{"exp-000002", "exp-000003"}));
  auto finished = (*store)->ListFinished();
  ASSERT_EQ(finished->size(), 1u);
  EXPECT_EQ((*finished)[0].id, "exp-000001");
  // Two thirds of ~600 KiB of events were freed, and the file gives them back.
  ASSERT_TRUE((*store)->ReclaimSpace().ok());
  const int64_t after = *(*store)->DatabaseBytes();
  EXPECT_LT(after, before / 2) << before << " -> " << after;
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(dir_ + "/vramlab.db")), after);
}

TEST_F(StoreDeletionTest, FinishedOldestEndFirstAndNeverQueuedRunningOrPending) {
  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok());
  Experiment late = Finished(1);
  late.mutable_end_time()->set_seconds(5000);
  ASSERT_TRUE((*store)->InsertExperiment(1, late).ok());
  ASSERT_TRUE((*store)->InsertExperiment(2, Finished(2)).ok());
  Experiment queued = Finished(3);
  queued.set_state(Experiment::QUEUED);
  ASSERT_TRUE((*store)->InsertExperiment(3, queued).ok());
  Experiment running = Finished(4);
  running.set_state(Experiment::RUNNING);
  ASSERT_TRUE((*store)->InsertExperiment(4, running).ok());
  Experiment pending = Finished(5);
  pending.set_state(Experiment::INTERRUPTED);
  ASSERT_TRUE((*store)->InsertExperiment(5, pending).ok());
  ASSERT_TRUE((*store)->UpdateExperiment(pending, /*requeue_pending=*/true).ok());
  auto finished = (*store)->ListFinished();
  ASSERT_TRUE(finished.ok());
  ASSERT_EQ(finished->size(), 2u);
  EXPECT_EQ((*finished)[0].id, "exp-000002");
  EXPECT_EQ((*finished)[1].id, "exp-000001");
}

TEST_F(StoreDeletionTest, AStoreMadeWithoutAutoVacuumIsConvertedKeepingItsData) {
  {
    auto store = Store::Open(dir_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->InsertExperiment(1, Finished(1)).ok());
    AddEvents(**store, "exp-000001", 10);
  }
  // As a daemon before incremental vacuum left it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/vramlab.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA auto_vacuum=NONE; VACUUM;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_stmt* mode = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA auto_vacuum", -1, &mode, nullptr);
  ASSERT_EQ(sqlite3_step(mode), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(mode, 0), 0);
  sqlite3_finalize(mode);
  sqlite3_close(db);

  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->AutoVacuumMode(), 2);
  auto kept = (*store)->GetExperiment("exp-000001");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->experiment.SerializeAsString(), Finished(1).SerializeAsString());
  EXPECT_EQ(*(*store)->MaxEventSequence("exp-000001"), 10);
}

TEST_F(StoreDeletionTest, ANewStoreIsIncrementalFromTheStart) {
  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->AutoVacuumMode(), 2);
}

}  // namespace
}  // namespace vramlab::server
