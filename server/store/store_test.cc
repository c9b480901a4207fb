#include "server/store/store.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/store/event_writer.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/store-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = Store::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  Experiment Make(int seq, const std::string& owner, Experiment::State state,
                  const std::string& request_id = "") {
    Experiment e;
    e.set_id("exp-" + std::to_string(seq));
    e.set_owner(owner);
    e.set_state(state);
    e.set_request_id(request_id);
    EXPECT_TRUE(store_->InsertExperiment(seq, e).ok());
    return e;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, ExperimentsSurviveReopenInWalMode) {
  Make(1, "alice", Experiment::QUEUED, "req-1");
  Experiment running = Make(2, "bob", Experiment::QUEUED);
  running.set_state(Experiment::RUNNING);
  ASSERT_TRUE(store_->UpdateExperiment(running).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/vramlab.db-wal"));  // journal_mode=WAL
  store_.reset();

  auto reopened = Store::Open(dir_);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*(*reopened)->MaxSeq(), 2);
  auto unfinished = (*reopened)->LoadUnfinished();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].experiment.id(), "exp-1");
  EXPECT_EQ((*unfinished)[1].experiment.state(), Experiment::RUNNING);
  auto found = (*reopened)->FindByRequestId("alice", "req-1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id(), "exp-1");
  EXPECT_FALSE((*reopened)->FindByRequestId("bob", "req-1")->has_value());
  EXPECT_EQ((*reopened)->GetExperiment("exp-9").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, RequeuePendingKeepsAFinishedRowInRecovery) {
  Experiment e = Make(1, "alice", Experiment::RUNNING);
  e.set_state(Experiment::INTERRUPTED);
  ASSERT_TRUE(store_->UpdateExperiment(e, /*requeue_pending=*/true).ok());
  auto unfinished = store_->LoadUnfinished();
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_TRUE((*unfinished)[0].requeue_pending);
  ASSERT_TRUE(store_->UpdateExperiment(e, false).ok());
  EXPECT_TRUE(store_->LoadUnfinished()->empty());
}

TEST_F(StoreTest, ListsNewestFirstWithFiltersAndPaging) {
  for (int i = 1; i <= 7; ++i) {
    Make(i, i % 2 ? "alice" : "bob", i <= 3 ? Experiment::SUCCEEDED : Experiment::QUEUED);
  }
  ListFilter filter;
  filter.limit = 3;
  auto page = store_->ListExperiments(filter);
  ASSERT_EQ(page->size(), 3u);
  EXPECT_EQ((*page)[0].seq, 7);
  filter.before_seq = (*page)[2].seq;
  page = store_->ListExperiments(filter);
  EXPECT_EQ((*page)[0].seq, 4);
  ListFilter alice_done;
  alice_done.owner = "alice";
  alice_done.states = {Experiment::SUCCEEDED};
  page = store_->ListExperiments(alice_done);
  ASSERT_EQ(page->size(), 2u);  // exp-3 and exp-1
  EXPECT_EQ((*page)[0].experiment.id(), "exp-3");
}

TEST_F(StoreTest, EventWriterBatchesAndReportsPersistedSequences) {
  absl::Mutex mu;
  std::map<std::string, int64_t> persisted;
  {
    EventWriter writer(store_.get(), {.flush_interval = absl::Milliseconds(5)},
                       [&](const std::string& id, int64_t sequence) {
                         absl::MutexLock lock(&mu);
                         persisted[id] = sequence;
                       });
    for (int i = 1; i <= 1000; ++i) {
      vramlab::v1::ExperimentEvent event;
      event.set_sequence(i);
      event.mutable_worker_event()->mutable_sample()->set_allocated_bytes(i);
      writer.Enqueue(i % 2 ? "a" : "b", event);
    }
    writer.Flush();
    absl::MutexLock lock(&mu);
    EXPECT_EQ(persisted["a"], 999);
    EXPECT_EQ(persisted["b"], 1000);
  }
  auto events = store_->ReadEvents("a", 990, 100);
  ASSERT_EQ(events->size(), 5u);  // 991, 993, ..., 999
  EXPECT_EQ((*events)[0].sequence(), 991);
  EXPECT_EQ((*events)[0].worker_event().sample().allocated_bytes(), 991);
  EXPECT_EQ(*store_->MaxEventSequence("b"), 1000);
  EXPECT_EQ(*store_->MaxEventSequence("none"), 0);
}

// A store whose writes fail while a fault file exists, as on a full disk.
class FailingStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/store-fault-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = Store::Open(dir_ + "/data", {.write_fault_file = fault_file()});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string fault_file() const { return dir_ + "/full"; }
  void FailWrites() { std::ofstream(fault_file()) << "full\n"; }
  void AllowWrites() { std::filesystem::remove(fault_file()); }
  static vramlab::v1::ExperimentEvent Event(int64_t sequence) {
    vramlab::v1::ExperimentEvent event;
    event.set_sequence(sequence);
    return event;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(FailingStoreTest, EventWriterHoldsRefusedEventsAndStoresThemOnceWritesWork) {
  FailWrites();
  EventWriter writer(store_.get(), {.flush_interval = absl::Milliseconds(5)},
                     [](const std::string&, int64_t) {});
  for (int i = 1; i <= 100; ++i) writer.Enqueue("a", Event(i));
  EXPECT_FALSE(writer.Flush(absl::Milliseconds(300)));
  EXPECT_TRUE(writer.failing());
  EXPECT_EQ(writer.Stats("a").held, 100);
  EXPECT_EQ(*store_->MaxEventSequence("a"), 0);

  AllowWrites();
  EXPECT_TRUE(writer.Flush());
  EXPECT_FALSE(writer.failing());
  EXPECT_EQ(*store_->MaxEventSequence("a"), 100);
  EXPECT_EQ(writer.Stats("a").held, 0);
  EXPECT_EQ(writer.Totals().dropped, 0);
}

TEST_F(FailingStoreTest, EventWriterCountsWhatItGivesUpBeyondItsBound) {
  FailWrites();
  absl::Mutex mu;
  int64_t reported = 0;
  EventWriter writer(store_.get(), {.flush_interval = absl::Milliseconds(5), .max_held_events = 10},
                     [&](const std::string&, int64_t sequence) {
                       absl::MutexLock lock(&mu);
                       reported = std::max(reported, sequence);
                     });
  for (int i = 1; i <= 25; ++i) writer.Enqueue("a", Event(i));
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (writer.Stats("a").dropped < 15 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(writer.Stats("a").dropped, 15);
  EXPECT_EQ(writer.Totals().dropped, 15);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(reported, 15);  // readers skip what was given up
  }
  AllowWrites();
  EXPECT_TRUE(writer.Flush());
  auto events = store_->ReadEvents("a", 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 10u);
  EXPECT_EQ(events->front().sequence(), 16);
}

TEST_F(FailingStoreTest, FailedWriteChangesNothing) {
  Experiment e;
  e.set_id("exp-1");
  e.set_state(Experiment::QUEUED);
  ASSERT_TRUE(store_->InsertExperiment(1, e).ok());
  FailWrites();
  e.set_state(Experiment::SUCCEEDED);
  EXPECT_FALSE(store_->UpdateExperiment(e).ok());
  EXPECT_FALSE(store_->Probe().ok());
  EXPECT_EQ(store_->GetExperiment("exp-1")->experiment.state(), Experiment::QUEUED);
  AllowWrites();
  EXPECT_TRUE(store_->Probe().ok());
}

}  // namespace
}  // namespace vramlab::server
