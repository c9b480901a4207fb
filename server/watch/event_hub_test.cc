#include "server/watch/event_hub.h"

#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/watch/watch_cursor.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentEvent;

class EventHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hub-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *Store::Open(dir_);
    EventHubOptions options;
    options.ring_capacity = 4;  // small, so watchers fall behind it
    options.flush_interval = absl::Milliseconds(2);
    hub_ = std::make_unique<EventHub>(store_.get(), options);
  }
  void TearDown() override {
    hub_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void PublishSamples(const std::string& id, int n) {
    for (int i = 0; i < n; ++i) {
      ExperimentEvent event;
      event.mutable_worker_event()->mutable_sample()->set_allocated_bytes(i);
      hub_->Publish(id, event);
    }
  }
  void PublishFinal(const std::string& id) {
    ExperimentEvent event;
    event.mutable_state_change()->set_state(vramlab::v1::Experiment::SUCCEEDED);
    hub_->Publish(id, event);
    hub_->Close(id);
  }
  // Reads a cursor to its end; the sequences seen.
  std::vector<int64_t> Drain(WatchCursor& cursor) {
    std::vector<int64_t> sequences;
    std::vector<ExperimentEvent> batch;
    for (int i = 0; i < 10000; ++i) {
      batch.clear();
      auto more = cursor.Next(&batch, absl::Milliseconds(50));
      EXPECT_TRUE(more.ok());
      for (const auto& e : batch) sequences.push_back(e.sequence());
      if (!more.ok() || !*more) break;
    }
    return sequences;
  }
  static std::vector<int64_t> Range(int64_t from, int64_t to) {
    std::vector<int64_t> r;
    for (int64_t i = from; i <= to; ++i) r.push_back(i);
    return r;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<EventHub> hub_;
};

TEST_F(EventHubTest, LateWatcherGetsHistoryFromStoreThenLiveThenEnd) {
  hub_->Open("e", 0);
  PublishSamples("e", 20);  // 16 of them fell out of the ring
  auto cursor = *WatchCursor::Create(hub_.get(), "e", 0, false);
  std::thread producer([&] {
    PublishSamples("e", 10);
    PublishFinal("e");
  });
  std::vector<int64_t> seen = Drain(*cursor);
  producer.join();
  EXPECT_EQ(seen, Range(1, 31));
}

TEST_F(EventHubTest, ResumesAfterASequenceAndSkipsHistorySamplesOnRequest) {
  hub_->Open("e", 0);
  PublishSamples("e", 10);
  auto resumed = *WatchCursor::Create(hub_.get(), "e", 7, false);
  auto skipping = *WatchCursor::Create(hub_.get(), "e", 0, true);
  PublishSamples("e", 2);  // live samples are never skipped
  PublishFinal("e");
  EXPECT_EQ(Drain(*resumed), Range(8, 13));
  EXPECT_EQ(Drain(*skipping), Range(11, 13));
}

TEST_F(EventHubTest, FinishedExperimentIsServedFromTheStoreAlone) {
  hub_->Open("e", 0);
  PublishSamples("e", 5);
  PublishFinal("e");
  hub_->Flush();
  for (int i = 0; i < 100 && hub_->Find("e") != nullptr; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(hub_->Find("e"), nullptr);  // drained channels go away
  auto cursor = *WatchCursor::Create(hub_.get(), "e", 2, false);
  EXPECT_EQ(Drain(*cursor), Range(3, 6));
}

TEST_F(EventHubTest, AStuckWatcherNeverBlocksThePublisherOrOthers) {
  hub_->Open("e", 0);
  auto stuck = *WatchCursor::Create(hub_.get(), "e", 0, false);  // never reads
  auto reader = *WatchCursor::Create(hub_.get(), "e", 0, false);
  auto start = absl::Now();
  PublishSamples("e", 5000);
  PublishFinal("e");
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(Drain(*reader), Range(1, 5001));
  EXPECT_EQ(Drain(*stuck), Range(1, 5001));  // catches up from the store when it reads again
}

TEST_F(EventHubTest, AWatcherBehindTheRingWaitsForASlowStoreAfterTheRunEnded) {
  // Commits far apart: the run ends while most of its events are neither in the ring nor stored.
  hub_.reset();
  EventHubOptions options;
  options.ring_capacity = 4;
  options.flush_interval = absl::Milliseconds(300);
  hub_ = std::make_unique<EventHub>(store_.get(), options);
  hub_->Open("e", 0);
  auto cursor = *WatchCursor::Create(hub_.get(), "e", 0, false);
  PublishSamples("e", 100);
  PublishFinal("e");
  ASSERT_FALSE(hub_->StoreFailing());
  EXPECT_EQ(Drain(*cursor), Range(1, 101));
}

TEST_F(EventHubTest, ShutdownEndsWatchesWithUnavailable) {
  hub_->Open("e", 0);
  auto cursor = *WatchCursor::Create(hub_.get(), "e", 0, false);
  hub_->Shutdown();
  std::vector<ExperimentEvent> batch;
  EXPECT_EQ(cursor->Next(&batch, absl::Seconds(1)).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EventHubTest, WatcherCountReachesTheListener) {
  std::atomic<int> reported{-1};
  hub_->SetWatcherListener([&](int n) { reported = n; });
  hub_->Open("e", 0);
  {
    auto a = *WatchCursor::Create(hub_.get(), "e", 0, false);
    auto b = *WatchCursor::Create(hub_.get(), "e", 0, false);
    EXPECT_EQ(reported.load(), 2);
    EXPECT_EQ(hub_->Find("e")->watchers(), 2);
  }
  EXPECT_EQ(reported.load(), 0);
}

}  // namespace
}  // namespace vramlab::server
