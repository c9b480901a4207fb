// Admission by memory against a real CPU daemon: a spec whose estimated peak exceeds the host's
// RAM is refused at submit with the estimate, the device memory and how to force it; force (or a
// memory limit that fits) admits it. No admitted spec runs for real here: the worker is
// /bin/true, so an admitted experiment ends at once without touching the host's memory.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

constexpr char kNoWorker[] = "--worker-path=/bin/true";

int64_t HostMemoryBytes() {
  return int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
}

ExperimentSpec BigSpec() {
  ExperimentSpec spec = TinySpec(/*seq_len=*/4096);
  spec.set_name("too big for this host");
  spec.mutable_model()->set_preset("qwen2.5-7b");
  spec.mutable_training()->set_micro_batch_size(8);
  return spec;
}

absl::StatusOr<vramlab::v1::Experiment> SubmitRequest(vramlab::v1::VramlabService::Stub& stub,
                                                      const ExperimentSpec& spec, bool force) {
  grpc::ClientContext context;
  vramlab::v1::SubmitExperimentRequest request;
  *request.mutable_spec() = spec;
  request.set_force(force);
  vramlab::v1::Experiment experiment;
  grpc::Status status = stub.SubmitExperiment(&context, request, &experiment);
  if (!status.ok()) return ToAbsl(status);
  return experiment;
}

class DaemonAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}, .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    stub_ = daemon_->NewStub();
    // The premise: the daemon's own estimate of BigSpec exceeds this host's RAM.
    grpc::ClientContext context;
    vramlab::v1::EstimateMemoryRequest request;
    *request.mutable_spec() = BigSpec();
    vramlab::v1::MemoryEstimate estimate;
    ASSERT_TRUE(stub_->EstimateMemory(&context, request, &estimate).ok());
    ASSERT_GT(estimate.predicted_peak_bytes(), HostMemoryBytes());
  }

  int ExperimentCount() {
    grpc::ClientContext context;
    vramlab::v1::ListExperimentsResponse list;
    EXPECT_TRUE(stub_->ListExperiments(&context, {}, &list).ok());
    return list.experiments_size();
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(DaemonAdmissionTest, ASpecLargerThanTheHostIsRefusedWithTheNumbersAndTheWayOut) {
  auto refused = SubmitRequest(*stub_, BigSpec(), /*force=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr("estimated peak of "));
  EXPECT_THAT(message, HasSubstr("host memory (CPU device) of "));
  EXPECT_THAT(message, HasSubstr("usable after a margin"));
  EXPECT_THAT(message, HasSubstr("vramlab submit --force"));
  EXPECT_EQ(ExperimentCount(), 0);
}

TEST_F(DaemonAdmissionTest, ForceAdmitsIt) {
  auto forced = SubmitRequest(*stub_, BigSpec(), /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->spec().model().preset(), "qwen2.5-7b");
  EXPECT_GT(forced->prediction().predicted_peak_bytes(), HostMemoryBytes());
  EXPECT_EQ(ExperimentCount(), 1);
}

// The worker enforces memory.device_memory_limit_bytes: a spec capped below the host's RAM ends
// in OOM at its cap instead of exhausting the host, so it is admitted.
TEST_F(DaemonAdmissionTest, AMemoryLimitThatFitsAdmitsIt) {
  ExperimentSpec capped = BigSpec();
  capped.mutable_memory()->set_device_memory_limit_bytes(int64_t{1} << 30);
  auto admitted = SubmitRequest(*stub_, capped, /*force=*/false);
  EXPECT_TRUE(admitted.ok()) << admitted.status();
  // A cap above the host's RAM bounds nothing.
  capped.mutable_memory()->set_device_memory_limit_bytes(HostMemoryBytes() * 2);
  auto refused = SubmitRequest(*stub_, capped, /*force=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("capped by memory.device_memory_limit_bytes"));
}

}  // namespace
}  // namespace vramlab::testing
