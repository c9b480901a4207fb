// Admission by memory against a real CPU daemon: a spec whose estimated peak exceeds the host's
// RAM is refused at submit with the estimate, the device memory and how to force it; force (or a
// memory limit that fits) admits it. No admitted spec runs for real here: the worker is
// /bin/true, so an admitted experiment ends at once without touching the host's memory.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

constexpr char kNoWorker[] = "--worker-path=/bin/true";

int64_t HostMemoryBytes() { return int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE); }

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
  EXPECT_THAT(message, HasSubstr("host memory share (CPU slot) of "));
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

// What an experiment can have on a CPU slot: the slot's share of the host's RAM.
absl::StatusOr<int64_t> SlotBytes(vramlab::v1::VramlabService::Stub& stub) {
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  grpc::Status status = stub.GetServerInfo(&context, {}, &info);
  if (!status.ok()) return ToAbsl(status);
  if (info.gpus_size() == 0) return absl::NotFoundError("no slots");
  return info.gpus(0).total_memory_bytes();
}

absl::StatusOr<int64_t> EstimatedPeak(vramlab::v1::VramlabService::Stub& stub,
                                      const ExperimentSpec& spec) {
  grpc::ClientContext context;
  vramlab::v1::EstimateMemoryRequest request;
  *request.mutable_spec() = spec;
  vramlab::v1::MemoryEstimate estimate;
  grpc::Status status = stub.EstimateMemory(&context, request, &estimate);
  if (!status.ok()) return ToAbsl(status);
  return estimate.predicted_peak_bytes();
}

// Slots on one host share its RAM: a spec that fits the host is admitted on a one-slot daemon
// and refused on a daemon with enough slots that one share is smaller than its peak; every slot
// reports its share.
TEST(DaemonSlotShareTest, EachCpuSlotAdmitsByItsShareOfTheHostsMemory) {
  ExperimentSpec spec = TinySpec(/*seq_len=*/512);
  spec.mutable_model()->set_preset("qwen2.5-0.5b");
  auto one =
      DaemonHarness::Start({.extra_flags = {kNoWorker, "--cpu-slots=1"}, .enable_metrics = false});
  ASSERT_TRUE(one.ok()) << one.status();
  auto one_stub = (*one)->NewStub();
  auto peak = EstimatedPeak(*one_stub, spec);
  ASSERT_TRUE(peak.ok()) << peak.status();
  const int64_t host = HostMemoryBytes();
  EXPECT_EQ(*SlotBytes(*one_stub), host);
  // The premise, on this host: the spec fits one slot of the whole host (less its margin).
  ASSERT_LT(*peak, host / 10 * 9) << "peak " << *peak << " host " << host;
  auto admitted = SubmitRequest(*one_stub, spec, /*force=*/false);
  EXPECT_TRUE(admitted.ok()) << admitted.status();

  // The fewest slots whose share is below the peak.
  const int64_t slots = host / *peak + 1;
  ASSERT_LE(slots, 256);
  auto shared =
      DaemonHarness::Start({.extra_flags = {kNoWorker, "--cpu-slots=" + std::to_string(slots)},
                            .enable_metrics = false});
  ASSERT_TRUE(shared.ok()) << shared.status();
  auto shared_stub = (*shared)->NewStub();
  EXPECT_EQ(*SlotBytes(*shared_stub), host / slots);
  auto refused = SubmitRequest(*shared_stub, spec, /*force=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("host memory share (CPU slot) of "));
  auto forced = SubmitRequest(*shared_stub, spec, /*force=*/true);
  EXPECT_TRUE(forced.ok()) << forced.status();
}

// A worker on a CPU slot is told to cap itself at the slot's usable share (what admission counts
// on): a stand-in worker prints the variable into the experiment's log.
TEST(DaemonSlotShareTest, TheWorkersDataCapIsItsSlotsUsableShare) {
  char dir_template[] = "/tmp/vramlab-env-worker-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string worker = std::string(dir_template) + "/worker.sh";
  {
    std::ofstream script(worker);
    script << "#!/bin/sh\necho \"cap=$VRAMLAB_HOST_MEMORY_LIMIT_BYTES\"\nexit 0\n";
  }
  ASSERT_EQ(chmod(worker.c_str(), 0755), 0);
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--worker-path=" + worker, "--cpu-slots=4"}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  auto submitted = Submit(*stub, TinySpec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(WaitForFinalState(*stub, submitted->id()).ok());
  grpc::ClientContext context;
  vramlab::v1::GetExperimentLogRequest request;
  request.set_id(submitted->id());
  auto reader = stub->GetExperimentLog(&context, request);
  std::string log;
  vramlab::v1::DataChunk chunk;
  while (reader->Read(&chunk)) log += chunk.data();
  ASSERT_TRUE(reader->Finish().ok());
  const int64_t share = *SlotBytes(*stub);
  EXPECT_EQ(share, HostMemoryBytes() / 4);
  // The admission margin: 5 % of the slot, at least 512 MiB.
  const int64_t usable = share - std::max(share / 20, int64_t{512} << 20);
  EXPECT_THAT(log, HasSubstr("cap=" + std::to_string(usable) + "\n")) << log;
  std::filesystem::remove_all(dir_template);
}

}  // namespace
}  // namespace vramlab::testing
