// What a real vramlabd answers stays bounded however long the text it passes on: a refusal that
// echoes a user's long field is cut to the status message bound (kMaxStatusMessageBytes), and a
// worker's long error to the state_reason bound (kMaxStateReasonBytes); both say how many bytes
// were cut, keep the text's start to the byte, and leave every listing answerable.
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/exit_codes.h"
#include "server/common/bounded_text.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::StartsWith;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;

constexpr int kWorkerErrorBytes = 300000;

// Checks that `bounded` is `full` cut to at most `max_bytes`, with the marker naming the bytes cut.
void ExpectCutFrom(const std::string& bounded, const std::string& full, size_t max_bytes) {
  EXPECT_LE(bounded.size(), max_bytes);
  const size_t kept = bounded.rfind(" ... (");
  ASSERT_NE(kept, std::string::npos) << bounded.substr(0, 200);
  EXPECT_EQ(bounded.substr(0, kept), full.substr(0, kept));
  EXPECT_EQ(bounded.substr(kept), " ... (" + std::to_string(full.size() - kept) + " bytes cut)");
  // What was kept is most of the bound: the cut is for the marker, not a guess.
  EXPECT_GT(kept, max_bytes - 64);
}

class DaemonMessageBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/vramlab-long-error-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    // A worker that refuses its spec with a long error event (events go to fd 3).
    const std::string worker = dir_ + "/worker.sh";
    std::ofstream(worker)
        << "#!/bin/sh\n"
        << "printf '{\"error\":{\"field\":\"training.seq_len\",\"message\":\"' >&3\n"
        << "head -c " << kWorkerErrorBytes << " /dev/zero | tr '\\0' x >&3\n"
        << "printf '\"}}\\n' >&3\n"
        << "exit " << vramlab::worker::kExitInvalidSpec << "\n";
    chmod(worker.c_str(), 0755);
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1", "--worker-path=" + worker}, .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<DaemonHarness> daemon_;
};

TEST_F(DaemonMessageBoundsTest, ARefusalEchoingALongFieldIsCutAndSaysHowMuch) {
  auto stub = daemon_->NewStub();
  // The refusal's words around the field, from a short unknown preset.
  ExperimentSpec spec = TinySpec();
  spec.mutable_model()->set_preset("zz");
  const absl::Status short_refusal = Submit(*stub, spec).status();
  ASSERT_EQ(short_refusal.code(), absl::StatusCode::kInvalidArgument) << short_refusal;
  const std::string words(short_refusal.message());
  const size_t at = words.find("\"zz\"");
  ASSERT_NE(at, std::string::npos) << words;

  const std::string preset(60000, 'p');
  spec.mutable_model()->set_preset(preset);
  const std::string full = words.substr(0, at + 1) + preset + words.substr(at + 3);
  for (const bool estimate : {false, true}) {
    SCOPED_TRACE(estimate ? "EstimateMemory" : "SubmitExperiment");
    absl::Status refusal;
    if (estimate) {
      grpc::ClientContext context;
      vramlab::v1::EstimateMemoryRequest request;
      *request.mutable_spec() = spec;
      vramlab::v1::MemoryEstimate response;
      refusal = ToAbsl(stub->EstimateMemory(&context, request, &response));
    } else {
      refusal = Submit(*stub, spec).status();
    }
    ASSERT_EQ(refusal.code(), absl::StatusCode::kInvalidArgument)
        << refusal.message().substr(0, 200);
    EXPECT_THAT(std::string(refusal.message()), StartsWith(words.substr(0, at + 1) + "ppp"));
    ExpectCutFrom(std::string(refusal.message()), full, server::kMaxStatusMessageBytes);
  }
}

TEST_F(DaemonMessageBoundsTest, AWorkersLongErrorIsCutInTheStateReasonAndListingsStillAnswer) {
  auto stub = daemon_->NewStub();
  constexpr int kExperiments = 20;  // 20 unbounded reasons would be 6 MB, over gRPC's 4 MiB
  std::string last_id;
  for (int i = 0; i < kExperiments; ++i) {
    auto submitted = Submit(*stub, TinySpec());
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    last_id = submitted->id();
  }
  auto ended = WaitForFinalState(*stub, last_id);
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_EQ(ended->state(), Experiment::FAILED);
  const std::string prefix = "invalid spec: ";
  const std::string& reason = ended->state_reason();
  ASSERT_THAT(reason, StartsWith(prefix + "training.seq_len: xxx"));
  const std::string detail = "training.seq_len: " + std::string(kWorkerErrorBytes, 'x');
  ExpectCutFrom(reason.substr(prefix.size()), detail, server::kMaxStateReasonBytes);

  grpc::ClientContext context;
  vramlab::v1::ListExperimentsRequest request;
  vramlab::v1::ListExperimentsResponse response;
  const grpc::Status listed = stub->ListExperiments(&context, request, &response);
  ASSERT_TRUE(listed.ok()) << listed.error_message();
  EXPECT_EQ(response.experiments_size(), kExperiments);
  for (const Experiment& experiment : response.experiments()) {
    EXPECT_LE(experiment.state_reason().size(), prefix.size() + server::kMaxStateReasonBytes);
  }
}

}  // namespace
}  // namespace vramlab::testing
