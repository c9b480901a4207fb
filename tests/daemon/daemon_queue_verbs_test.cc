// The queue verbs through a real daemon over gRPC: update, hold/release, dependencies (after_id,
// after_ok), start estimates, and deletion with its permission and state rules. A stand-in worker
// (tests/support/stand_in_worker.h) makes starts and outcomes deterministic.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"
#include "tests/support/stand_in_worker.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

constexpr char kAlice[] = "alice-token-000000000001";
constexpr char kBob[] = "bob-token-00000000000002";
constexpr char kAdmin[] = "admin-token-000000000004";

class DaemonQueueVerbsTest : public ::testing::Test {
 protected:
  void StartDaemon(int slots, std::vector<std::string> flags = {}) {
    worker_ = WriteStandInWorker();
    dir_ = std::filesystem::path(worker_).parent_path().string();
    const std::string tokens = dir_ + "/tokens";
    ASSERT_TRUE(
        WriteTokensFile(
            tokens, {{kAlice, "alice", "user"}, {kBob, "bob", "user"}, {kAdmin, "root", "admin"}})
            .ok());
    flags.insert(flags.begin(), {"--cpu-slots=" + std::to_string(slots), "--worker-path=" + worker_,
                                 "--cancel-grace-period=1s", "--auth-tokens=" + tokens});
    auto daemon = DaemonHarness::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  static vramlab::v1::ExperimentSpec Named(const std::string& name, int time_limit = 0) {
    vramlab::v1::ExperimentSpec spec = TinySpec();
    spec.set_name(name);
    spec.set_time_limit_seconds(time_limit);
    return spec;
  }
  std::string SubmitOk(const std::string& name, const std::string& token = kAlice) {
    auto submitted = Submit(*stub_, Named(name), token);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->id() : "";
  }
  absl::StatusOr<Experiment> SubmitAfter(const std::string& name, const std::string& after,
                                         bool ok) {
    grpc::ClientContext context;
    AddBearerToken(&context, kAlice);
    vramlab::v1::SubmitExperimentRequest request;
    *request.mutable_spec() = Named(name);
    request.set_after_id(after);
    request.set_after_ok(ok);
    Experiment experiment;
    grpc::Status status = stub_->SubmitExperiment(&context, request, &experiment);
    if (!status.ok()) return ToAbsl(status);
    return experiment;
  }
  Experiment Get(const std::string& id) {
    grpc::ClientContext context;
    AddBearerToken(&context, kAdmin);
    vramlab::v1::GetExperimentRequest request;
    request.set_id(id);
    Experiment experiment;
    grpc::Status status = stub_->GetExperiment(&context, request, &experiment);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return experiment;
  }
  absl::StatusOr<Experiment> Update(const vramlab::v1::UpdateExperimentRequest& request,
                                    const std::string& token) {
    grpc::ClientContext context;
    AddBearerToken(&context, token);
    Experiment experiment;
    grpc::Status status = stub_->UpdateExperiment(&context, request, &experiment);
    if (!status.ok()) return ToAbsl(status);
    return experiment;
  }
  absl::StatusOr<Experiment> Hold(const std::string& id, const std::string& token, bool hold) {
    grpc::ClientContext context;
    AddBearerToken(&context, token);
    Experiment experiment;
    grpc::Status status;
    if (hold) {
      vramlab::v1::HoldExperimentRequest request;
      request.set_id(id);
      status = stub_->HoldExperiment(&context, request, &experiment);
    } else {
      vramlab::v1::ReleaseExperimentRequest request;
      request.set_id(id);
      status = stub_->ReleaseExperiment(&context, request, &experiment);
    }
    if (!status.ok()) return ToAbsl(status);
    return experiment;
  }
  absl::StatusOr<vramlab::v1::DeleteExperimentResponse> Delete(const std::string& id,
                                                               const std::string& token) {
    grpc::ClientContext context;
    AddBearerToken(&context, token);
    vramlab::v1::DeleteExperimentRequest request;
    request.set_id(id);
    vramlab::v1::DeleteExperimentResponse response;
    grpc::Status status = stub_->DeleteExperiment(&context, request, &response);
    if (!status.ok()) return ToAbsl(status);
    return response;
  }
  std::string StartHang(const std::string& token = kAlice, int time_limit = 0) {
    auto submitted = Submit(*stub_, Named("hang", time_limit), token);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    EXPECT_TRUE(
        WaitForState(*stub_, submitted->id(), Experiment::RUNNING, absl::Seconds(30), kAdmin).ok());
    return submitted->id();
  }
  Experiment Final(const std::string& id) {
    auto done = WaitForFinalState(*stub_, id, absl::Seconds(60), kAdmin);
    EXPECT_TRUE(done.ok()) << done.status();
    return done.ok() ? *done : Experiment();
  }

  std::string worker_;
  std::string dir_;
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(DaemonQueueVerbsTest, UpdateChangesPriorityTimeLimitAndNameOfQueuedOnly) {
  StartDaemon(1, {"--max-time-limit=2h"});
  const std::string blocker = StartHang();
  const std::string a = SubmitOk("a");
  const std::string b = SubmitOk("b", kBob);
  EXPECT_EQ(Get(a).queue_position(), 1);

  vramlab::v1::UpdateExperimentRequest request;
  request.set_id(a);
  request.set_priority(vramlab::v1::PRIORITY_LOW);
  // Bob may not change Alice's.
  EXPECT_EQ(Update(request, kBob).status().code(), absl::StatusCode::kPermissionDenied);
  auto lowered = Update(request, kAlice);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(lowered->spec().priority(), vramlab::v1::PRIORITY_LOW);
  EXPECT_EQ(lowered->queue_position(), 2);
  EXPECT_EQ(Get(b).queue_position(), 1);

  vramlab::v1::UpdateExperimentRequest limit;
  limit.set_id(a);
  limit.set_time_limit_seconds(3 * 3600);
  auto too_long = Update(limit, kAlice);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("time_limit_seconds: must be 1 .. 7200"));
  limit.set_time_limit_seconds(90);
  limit.set_name("renamed");
  auto updated = Update(limit, kAdmin);  // an admin may change anyone's
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->spec().time_limit_seconds(), 90);
  EXPECT_EQ(updated->spec().name(), "renamed");

  vramlab::v1::UpdateExperimentRequest nothing;
  nothing.set_id(a);
  EXPECT_THAT(Update(nothing, kAlice).status().message(), HasSubstr("nothing to update"));
  vramlab::v1::UpdateExperimentRequest bad_name;
  bad_name.set_id(a);
  bad_name.set_name(std::string(300, 'x'));
  EXPECT_THAT(Update(bad_name, kAlice).status().message(), HasSubstr("name: at most 256 bytes"));

  vramlab::v1::UpdateExperimentRequest running;
  running.set_id(blocker);
  running.set_time_limit_seconds(60);
  auto refused = Update(running, kAlice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("is RUNNING: only a queued experiment can be updated"));

  // Stored: a daemon killed and restarted keeps the update.
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  const Experiment recovered = Get(a);
  EXPECT_EQ(recovered.spec().time_limit_seconds(), 90);
  EXPECT_EQ(recovered.spec().name(), "renamed");
  EXPECT_EQ(recovered.spec().priority(), vramlab::v1::PRIORITY_LOW);
}

TEST_F(DaemonQueueVerbsTest, HeldKeepsItsPlaceButDoesNotStartUntilReleased) {
  StartDaemon(1);
  const std::string blocker = StartHang();
  const std::string first = SubmitOk("first");
  const std::string second = SubmitOk("second", kBob);
  EXPECT_EQ(Hold(first, kBob, true).status().code(), absl::StatusCode::kPermissionDenied);
  auto held = Hold(first, kAlice, true);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(held->held());
  EXPECT_EQ(held->queue_position(), 1);
  // Held across a crash.
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  EXPECT_TRUE(Get(first).held());
  // The recovered blocker ended INTERRUPTED; the one behind the held one ran meanwhile.
  EXPECT_EQ(Final(second).state(), Experiment::SUCCEEDED);
  EXPECT_EQ(Get(first).state(), Experiment::QUEUED);
  EXPECT_EQ(Get(blocker).state(), Experiment::INTERRUPTED);

  auto released = Hold(first, kAdmin, false);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->held());
  EXPECT_EQ(Final(first).state(), Experiment::SUCCEEDED);
  auto late = Hold(first, kAlice, true);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(), HasSubstr("only a queued experiment can be held"));
}

TEST_F(DaemonQueueVerbsTest, DependenciesWaitAndEndWithTheReasonWhenUnsatisfied) {
  StartDaemon(2);
  const std::string dependency = StartHang();
  auto any = SubmitAfter("any", dependency, /*ok=*/false);
  ASSERT_TRUE(any.ok()) << any.status();
  auto needs_ok = SubmitAfter("needs-ok", dependency, /*ok=*/true);
  ASSERT_TRUE(needs_ok.ok()) << needs_ok.status();
  auto chained = SubmitAfter("chained", needs_ok->id(), /*ok=*/true);
  ASSERT_TRUE(chained.ok()) << chained.status();
  EXPECT_EQ(chained->after_id(), needs_ok->id());
  EXPECT_TRUE(chained->after_ok());
  // A free slot runs what does not wait: the dependents were passed over, not blocking.
  const std::string free = SubmitOk("free");
  EXPECT_EQ(Final(free).state(), Experiment::SUCCEEDED);
  EXPECT_EQ(Get(any->id()).state(), Experiment::QUEUED);
  EXPECT_EQ(Get(needs_ok->id()).state(), Experiment::QUEUED);

  ASSERT_TRUE(Cancel(*stub_, dependency, kAlice).ok());
  const Experiment cancelled_dependency = Final(dependency);
  const Experiment ran = Final(any->id());
  EXPECT_EQ(ran.state(), Experiment::SUCCEEDED);
  EXPECT_GE(
      absl::FromUnixMicros(ran.start_time().seconds() * 1000000 + ran.start_time().nanos() / 1000),
      absl::FromUnixMicros(cancelled_dependency.end_time().seconds() * 1000000 +
                           cancelled_dependency.end_time().nanos() / 1000));
  const Experiment not_started = Final(needs_ok->id());
  EXPECT_EQ(not_started.state(), Experiment::CANCELLED);
  EXPECT_EQ(not_started.state_reason(), "not started: it was to run after " + dependency +
                                            " succeeded, and " + dependency + " ended CANCELLED");
  const Experiment chain = Final(chained->id());
  EXPECT_EQ(chain.state(), Experiment::CANCELLED);
  EXPECT_THAT(chain.state_reason(), HasSubstr(needs_ok->id() + " ended CANCELLED"));

  // After one that succeeded: runs. After one that failed, already ended: refused.
  const std::string succeeded = SubmitOk("ok");
  ASSERT_EQ(Final(succeeded).state(), Experiment::SUCCEEDED);
  auto after_success = SubmitAfter("after-success", succeeded, true);
  ASSERT_TRUE(after_success.ok());
  EXPECT_EQ(Final(after_success->id()).state(), Experiment::SUCCEEDED);
  const std::string failed = SubmitOk("fail");
  ASSERT_EQ(Final(failed).state(), Experiment::FAILED);
  auto refused = SubmitAfter("after-failure", failed, true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("after_id: " + failed + " already ended FAILED; after_ok needs it"));
  auto unknown = SubmitAfter("after-nothing", "exp-999999", false);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("after_id: experiment exp-999999 not found"));
  auto bad = SubmitAfter("after-bad", "exp 1", false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("after_id: printable ASCII only"));
}

TEST_F(DaemonQueueVerbsTest, DependentQueuedAcrossARestartEndsWhenItsDependencyFailed) {
  StartDaemon(1);
  const std::string dependency = StartHang();
  auto dependent = SubmitAfter("dependent", dependency, true);
  ASSERT_TRUE(dependent.ok());
  // The dependency ends INTERRUPTED with the daemon (not requeued): the dependent ends at start.
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  const Experiment ended = Final(dependent->id());
  EXPECT_EQ(ended.state(), Experiment::CANCELLED);
  EXPECT_THAT(ended.state_reason(), HasSubstr(dependency + " ended INTERRUPTED"));
}

TEST_F(DaemonQueueVerbsTest, StartEstimatesFollowTheTimeLimitsAhead) {
  StartDaemon(1, {"--cancel-grace-period=2s"});
  const std::string blocker = StartHang(kAlice, 600);
  auto a = Submit(*stub_, Named("a", 300), kAlice);
  auto b = Submit(*stub_, Named("b", 120), kBob);
  ASSERT_TRUE(a.ok() && b.ok());
  const Experiment running = Get(blocker);
  const Experiment first = Get(a->id());
  const Experiment second = Get(b->id());
  ASSERT_TRUE(first.has_estimated_start_time());
  auto seconds = [](const google::protobuf::Timestamp& t) { return t.seconds() + t.nanos() / 1e9; };
  // The blocker may hold its slot until its start + time limit + grace period + 5 s to be reaped.
  const double blocker_end = seconds(running.start_time()) + 600 + 2 + 5;
  EXPECT_NEAR(seconds(first.estimated_start_time()), blocker_end, 1.0);
  EXPECT_EQ(first.start_estimate_basis(), "from the time limits of 1 running");
  EXPECT_NEAR(seconds(second.estimated_start_time()), blocker_end + 300 + 7, 1.0);
  EXPECT_EQ(second.start_estimate_basis(), "from the time limits of 1 running and 1 queued ahead");
  // Listed the same; a held one has none, and the one behind it moves up.
  ASSERT_TRUE(Hold(a->id(), kAlice, true).ok());
  grpc::ClientContext context;
  AddBearerToken(&context, kAdmin);
  vramlab::v1::ListExperimentsRequest list;
  list.add_states(Experiment::QUEUED);
  vramlab::v1::ListExperimentsResponse listed;
  ASSERT_TRUE(stub_->ListExperiments(&context, list, &listed).ok());
  ASSERT_EQ(listed.experiments_size(), 2);
  for (const Experiment& e : listed.experiments()) {
    if (e.id() == a->id()) {
      EXPECT_FALSE(e.has_estimated_start_time());
    } else {
      EXPECT_NEAR(seconds(e.estimated_start_time()), blocker_end, 1.0);
    }
  }
  // Running and finished ones have none.
  EXPECT_FALSE(running.has_estimated_start_time());
}

TEST_F(DaemonQueueVerbsTest, DeleteOnlyEndedOnesOwnersOrAdminsAndNeverReusesTheId) {
  StartDaemon(1);
  const std::string running = StartHang();
  const std::string queued = SubmitOk("queued");
  auto refused = Delete(running, kAlice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "experiment " + running +
                                            " is RUNNING: cancel it first (vramlab cancel " +
                                            running + "), then delete it");
  EXPECT_EQ(Delete(queued, kAlice).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Cancel(*stub_, running, kAlice).ok());
  ASSERT_EQ(Final(queued).state(), Experiment::SUCCEEDED);
  const std::filesystem::path dir =
      std::filesystem::path(daemon_->data_dir()) / "experiments" / queued;
  ASSERT_TRUE(std::filesystem::exists(dir));
  EXPECT_EQ(Delete(queued, kBob).status().code(), absl::StatusCode::kPermissionDenied);
  auto deleted = Delete(queued, kAlice);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->id(), queued);
  EXPECT_GT(deleted->file_bytes(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir));
  auto gone = Delete(queued, kAlice);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(gone.status().message(), "experiment " + queued + " was deleted");
  EXPECT_EQ(WatchAll(*stub_, queued, 0, absl::Seconds(5), kAlice).status().code(),
            absl::StatusCode::kNotFound);
  // An admin deletes anyone's; the deleted one was the newest, and its id is not given again,
  // even after a restart.
  ASSERT_TRUE(Delete(running, kAdmin).ok());
  ASSERT_TRUE(daemon_->Kill().ok());
  ASSERT_TRUE(daemon_->Restart().ok());
  stub_ = daemon_->NewStub();
  const std::string next = SubmitOk("next");
  EXPECT_GT(next, queued);
  EXPECT_EQ(Delete("exp 1", kAlice).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vramlab::testing
