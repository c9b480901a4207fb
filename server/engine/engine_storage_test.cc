// The Engine on a store that cannot write (a fault file under the store makes every write fail
// as on a full disk): a change it can decline is not shown unless stored, a change that happened
// is kept and retried until stored, and submissions are refused meanwhile.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/engine/testing/engine_fixture.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

namespace fs = std::filesystem;

class EngineStorageTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    // A worker that runs until it is stopped: the first experiment holds the only slot.
    EngineOptions options = BaseOptions(WriteWorker("exec sleep 600\n"), 1);
    options.worker_limits.cancel_grace_period = std::chrono::milliseconds(500);
    options.store.write_fault_file = fault_file();
    ASSERT_NO_FATAL_FAILURE(CreateAndStart(options));
  }
  void TearDown() override {
    fs::remove(fault_file());
    EngineFixture::TearDown();
  }

  std::string fault_file() const { return root_ + "/disk-is-full"; }
  void FailWrites() { std::ofstream(fault_file()) << "full\n"; }
  void AllowWrites() { fs::remove(fault_file()); }

  absl::StatusOr<Experiment> SubmitOne() {
    vramlab::v1::SubmitExperimentRequest request;
    request.mutable_spec()->set_name("x");
    request.mutable_spec()->mutable_model()->set_preset("tiny");
    request.mutable_spec()->mutable_training()->set_seq_len(32);
    request.mutable_spec()->mutable_training()->set_micro_batch_size(1);
    request.mutable_spec()->mutable_training()->set_steps(1);
    return engine_->Submit(user_, request);
  }
  // The state as the store has it, read through a second connection.
  Experiment::State StoredState(const std::string& id) {
    auto store = Store::Open(root_ + "/data");
    EXPECT_TRUE(store.ok()) << store.status();
    auto stored = (*store)->GetExperiment(id);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored->experiment.state();
  }
};

TEST_F(EngineStorageTest, CancelThatCannotBeStoredIsNotShownAsDone) {
  auto running = SubmitOne();
  ASSERT_TRUE(running.ok()) << running.status();
  auto queued = SubmitOne();
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_EQ(queued->state(), Experiment::QUEUED);

  FailWrites();
  auto cancelled = engine_->Cancel(user_, queued->id());
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(cancelled.status().message()), HasSubstr(root_ + "/data"));
  EXPECT_EQ(engine_->Get(queued->id())->state(), Experiment::QUEUED);
  EXPECT_EQ(StoredState(queued->id()), Experiment::QUEUED);

  AllowWrites();
  cancelled = engine_->Cancel(user_, queued->id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), Experiment::CANCELLED);
  EXPECT_EQ(StoredState(queued->id()), Experiment::CANCELLED);
}

TEST_F(EngineStorageTest, SubmissionsAreRefusedWhileTheStoreCannotWrite) {
  FailWrites();
  auto refused = SubmitOne();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("the disk of the data directory " + root_ + "/data"));
  EXPECT_THAT(metrics_->Serialize(), HasSubstr("vramlab_store_writable 0"));

  AllowWrites();
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<Experiment> accepted = SubmitOne();
  while (!accepted.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    accepted = SubmitOne();
  }
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ(StoredState(accepted->id()), accepted->state());
}

TEST_F(EngineStorageTest, FinalStateThatHappenedIsKeptAndStoredOnceWritesWork) {
  auto run = SubmitOne();
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->state(), Experiment::RUNNING);

  FailWrites();
  ASSERT_TRUE(engine_->Cancel(user_, run->id()).ok());  // the worker is stopped: it happened
  Experiment shown = WaitUntil(
      run->id(), [](const Experiment& e) { return e.state() == Experiment::CANCELLED; },
      absl::Seconds(60));
  EXPECT_EQ(shown.state(), Experiment::CANCELLED);
  EXPECT_TRUE(shown.storage_pending());
  EXPECT_EQ(StoredState(run->id()), Experiment::RUNNING);
  EXPECT_THAT(metrics_->Serialize(),
              HasSubstr("vramlab_store_pending{kind=\"experiment_states\"} 1"));

  AllowWrites();
  Experiment stored = WaitUntil(
      run->id(), [](const Experiment& e) { return !e.storage_pending(); }, absl::Seconds(60));
  EXPECT_FALSE(stored.storage_pending());
  EXPECT_EQ(StoredState(run->id()), Experiment::CANCELLED);
}

}  // namespace
}  // namespace vramlab::server
