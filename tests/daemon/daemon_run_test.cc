// End to end with the real worker on the CPU: submit, watch live, history and resume, logs,
// listing, idempotency, server info and the standard health service.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"
#include "tests/support/shared_daemon.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;

class DaemonRunTest : public SharedDaemonSuite<DaemonRunTest> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=2"}; }
};

TEST_F(DaemonRunTest, SubmitWatchSucceededWithSamplesAndReport) {
  vramlab::v1::ExperimentSpec spec = TinySpec();
  spec.mutable_memory()->set_sample_interval_ms(1);
  auto submitted = Submit(*stub_, spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_THAT(submitted->id(), ::testing::StartsWith("exp-"));
  EXPECT_EQ(submitted->owner(), "local");
  EXPECT_TRUE(submitted->has_prediction());

  auto events = WatchAll(*stub_, submitted->id());
  ASSERT_TRUE(events.ok()) << events.status() << "\n" << daemon_->ReadLog();
  ASSERT_GE(events->size(), 4u);
  std::vector<Experiment::State> states;
  int samples = 0, steps = 0, reports = 0, started = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    const ExperimentEvent& e = (*events)[i];
    EXPECT_EQ(e.sequence(), static_cast<int64_t>(i + 1));
    EXPECT_TRUE(e.has_time());
    if (e.has_state_change()) states.push_back(e.state_change().state());
    if (!e.has_worker_event()) continue;
    samples += e.worker_event().has_sample();
    steps += e.worker_event().has_step();
    reports += e.worker_event().has_report();
    started += e.worker_event().has_started();
  }
  EXPECT_EQ(states.front(), Experiment::QUEUED);
  EXPECT_EQ(states.back(), Experiment::SUCCEEDED);
  EXPECT_THAT(states, ::testing::Contains(Experiment::RUNNING));
  EXPECT_TRUE(events->back().has_state_change()) << "the final state is the last event";
  EXPECT_EQ(started, 1);
  EXPECT_GE(samples, 1);
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(reports, 1);

  auto done = WaitForFinalState(*stub_, submitted->id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
  EXPECT_EQ(done->worker_exit_status(), 0);
  EXPECT_GT(done->report().anatomy().weights_bytes(), 0);
  EXPECT_EQ(done->spec().device(), vramlab::v1::CPU);
  EXPECT_THAT(done->spec().memory().snapshot_path(), HasSubstr(done->id()));
  EXPECT_TRUE(done->has_start_time() && done->has_end_time());

  // A late watcher gets the same history; a resumed one only what follows.
  auto again = WatchAll(*stub_, submitted->id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), events->size());
  auto resumed = WatchAll(*stub_, submitted->id(), 3);
  ASSERT_TRUE(resumed.ok());
  ASSERT_EQ(resumed->size(), events->size() - 3);
  EXPECT_EQ(resumed->front().sequence(), 4);

  // Skipping history samples drops samples only.
  grpc::ClientContext context;
  vramlab::v1::WatchExperimentRequest request;
  request.set_id(submitted->id());
  request.set_skip_history_samples(true);
  auto reader = stub_->WatchExperiment(&context, request);
  ExperimentEvent event;
  size_t skipped_count = 0;
  while (reader->Read(&event)) {
    EXPECT_FALSE(event.has_worker_event() && event.worker_event().has_sample());
    ++skipped_count;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(skipped_count, events->size() - samples);
}

TEST_F(DaemonRunTest, LogAndSnapshotDownloads) {
  auto submitted = Submit(*stub_, TinySpec());
  ASSERT_TRUE(submitted.ok());
  ASSERT_TRUE(WaitForFinalState(*stub_, submitted->id()).ok());
  grpc::ClientContext context;
  vramlab::v1::GetExperimentLogRequest request;
  request.set_id(submitted->id());
  auto reader = stub_->GetExperimentLog(&context, request);
  vramlab::v1::DataChunk chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  // The CPU backend writes no allocator snapshot: NOT_FOUND, and has_snapshot says so.
  auto done = WaitForFinalState(*stub_, submitted->id());
  grpc::ClientContext snapshot_context;
  vramlab::v1::GetMemorySnapshotRequest snapshot_request;
  snapshot_request.set_id(submitted->id());
  auto snapshot = stub_->GetMemorySnapshot(&snapshot_context, snapshot_request);
  bool got = snapshot->Read(&chunk);
  grpc::Status status = snapshot->Finish();
  if (done->has_snapshot()) {
    EXPECT_TRUE(got && status.ok());
  } else {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  grpc::ClientContext missing_context;
  vramlab::v1::GetExperimentRequest missing;
  missing.set_id("exp-999999");
  Experiment ignored;
  EXPECT_EQ(stub_->GetExperiment(&missing_context, missing, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonRunTest, SubmitIsIdempotentByRequestId) {
  auto first = Submit(*stub_, TinySpec(), "", "retry-key-1");
  auto second = Submit(*stub_, TinySpec(), "", "retry-key-1");
  auto other = Submit(*stub_, TinySpec(), "", "retry-key-2");
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_EQ(first->id(), second->id());
  EXPECT_NE(first->id(), other->id());
  EXPECT_EQ(second->request_id(), "retry-key-1");
  ASSERT_TRUE(WaitForFinalState(*stub_, first->id()).ok());
  ASSERT_TRUE(WaitForFinalState(*stub_, other->id()).ok());
}

TEST_F(DaemonRunTest, ListPagesNewestFirstAndFilters) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto e = Submit(*stub_, TinySpec());
    ASSERT_TRUE(e.ok());
    ids.push_back(e->id());
  }
  for (const auto& id : ids) ASSERT_TRUE(WaitForFinalState(*stub_, id).ok());
  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    grpc::ClientContext context;
    vramlab::v1::ListExperimentsRequest request;
    request.set_page_size(2);
    request.set_page_token(token);
    vramlab::v1::ListExperimentsResponse response;
    ASSERT_TRUE(stub_->ListExperiments(&context, request, &response).ok());
    EXPECT_LE(response.experiments_size(), 2);
    for (const auto& e : response.experiments()) listed.push_back(e.id());
    token = response.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 100);
  ASSERT_GE(listed.size(), 3u);
  EXPECT_TRUE(std::is_sorted(listed.rbegin(), listed.rend())) << "newest first";
  EXPECT_EQ(listed[0], ids[2]);

  grpc::ClientContext context;
  vramlab::v1::ListExperimentsRequest request;
  request.add_states(Experiment::RUNNING);
  request.add_states(Experiment::QUEUED);
  vramlab::v1::ListExperimentsResponse response;
  ASSERT_TRUE(stub_->ListExperiments(&context, request, &response).ok());
  for (const auto& e : response.experiments()) EXPECT_TRUE(e.state() <= Experiment::RUNNING);

  grpc::ClientContext bad_context;
  request.set_page_token("not-a-token");
  EXPECT_EQ(stub_->ListExperiments(&bad_context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DaemonRunTest, ServerInfoAndHealthService) {
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.device(), vramlab::v1::CPU);
  EXPECT_EQ(info.gpus_size(), 2);
  EXPECT_FALSE(info.auth_enabled());
  EXPECT_FALSE(info.version().empty());
  EXPECT_THAT(info.worker_path(), HasSubstr("vramlab-worker"));

  // grpc.health.v1.Health/Check with an empty request: response field 1 (status) = SERVING (1).
  auto bytes = RawUnaryCall(daemon_->channel(), "/grpc.health.v1.Health/Check", "");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace vramlab::testing
