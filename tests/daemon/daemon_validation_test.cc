// Malformed requests over gRPC: every bad spec is INVALID_ARGUMENT naming the field, garbage bytes
// are rejected by gRPC, and the daemon keeps serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

struct BadSpec {
  const char* name;
  std::function<void(ExperimentSpec&)> mutate;
  const char* message;
};

TEST(DaemonValidationTest, MalformedSpecsAreInvalidArgumentNamingTheField) {
  auto daemon = DaemonHarness::Start({.extra_flags = {"--max-seq-len=4096", "--max-steps=100"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  std::vector<BadSpec> cases = {
      {"no model", [](ExperimentSpec& s) { s.mutable_model()->clear_preset(); },
       "spec.model.preset: one of preset, config or weights_dir is required"},
      {"unknown preset", [](ExperimentSpec& s) { s.mutable_model()->set_preset("llama"); },
       "spec.model.preset: unknown preset"},
      {"seq too long", [](ExperimentSpec& s) { s.mutable_training()->set_seq_len(8192); },
       "spec.training.seq_len: must be between 2 and 4096, got 8192"},
      {"negative batch", [](ExperimentSpec& s) { s.mutable_training()->set_micro_batch_size(-4); },
       "spec.training.micro_batch_size"},
      {"too many steps", [](ExperimentSpec& s) { s.mutable_training()->set_steps(101); },
       "spec.training.steps"},
      {"enum out of range",
       [](ExperimentSpec& s) {
         s.mutable_training()->set_attention(static_cast<vramlab::v1::AttentionImpl>(42));
       },
       "spec.training.attention: unknown enum value 42"},
      {"infinite lr",
       [](ExperimentSpec& s) {
         s.mutable_training()->mutable_optimizer()->set_learning_rate(1.0 / 0.0);
       },
       "spec.training.optimizer.learning_rate"},
      {"snapshot path", [](ExperimentSpec& s) { s.mutable_memory()->set_snapshot_path("/tmp/x"); },
       "spec.memory.snapshot_path"},
      {"fault without flag", [](ExperimentSpec& s) { s.set_fault(vramlab::v1::SEGFAULT); },
       "spec.fault: fault injection is disabled"},
      {"cuda on cpu daemon", [](ExperimentSpec& s) { s.set_device(vramlab::v1::CUDA); },
       "spec.device"},
      {"negative time limit", [](ExperimentSpec& s) { s.set_time_limit_seconds(-1); },
       "spec.time_limit_seconds"},
      {"huge spec",
       [](ExperimentSpec& s) { s.mutable_model()->set_weights_dir("/" + std::string(70000, 'a')); },
       "bytes, at most 65536 allowed"},
      {"sweep without variable", [](ExperimentSpec& s) { s.mutable_sweep()->add_values(512); },
       "spec.sweep.variable"},
      {"priority out of range",
       [](ExperimentSpec& s) { s.set_priority(static_cast<vramlab::v1::Priority>(-3)); },
       "spec.priority"},
  };
  for (const BadSpec& bad : cases) {
    ExperimentSpec spec = TinySpec();
    bad.mutate(spec);
    auto result = Submit(*stub, spec);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad.name;
    EXPECT_THAT(result.status().message(), HasSubstr(bad.message)) << bad.name;
  }
  // No spec at all.
  grpc::ClientContext context;
  vramlab::v1::SubmitExperimentRequest empty;
  vramlab::v1::Experiment ignored;
  EXPECT_EQ(stub->SubmitExperiment(&context, empty, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // EstimateMemory validates the same way.
  grpc::ClientContext estimate_context;
  vramlab::v1::EstimateMemoryRequest estimate;
  *estimate.mutable_spec() = TinySpec();
  estimate.mutable_spec()->mutable_training()->set_seq_len(-1);
  vramlab::v1::MemoryEstimate prediction;
  EXPECT_EQ(stub->EstimateMemory(&estimate_context, estimate, &prediction).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Bytes that are not a protobuf message at all.
  for (std::string garbage : {std::string("\xff\xff\xff\xff\x0f", 5), std::string(1000, '\x0a')}) {
    auto result =
        RawUnaryCall((*daemon)->channel(), "/vramlab.v1.VramlabService/SubmitExperiment", garbage);
    EXPECT_FALSE(result.ok());
  }

  // Nothing was queued and the daemon still serves a good spec.
  grpc::ClientContext info_context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub->GetServerInfo(&info_context, {}, &info).ok());
  EXPECT_EQ(info.queue_depth() + info.running(), 0);
  auto good = Submit(*stub, TinySpec());
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(WaitForFinalState(*stub, good->id())->state(), vramlab::v1::Experiment::SUCCEEDED);
}

// The gRPC receive limit lies above the spec limits, so an oversized field reaches the spec
// checks and is named, instead of failing in transport with RESOURCE_EXHAUSTED.
TEST(DaemonValidationTest, ATenMegabyteNameIsNamedNotATransportError) {
  auto daemon =
      DaemonHarness::Start({.extra_flags = {"--worker-path=/bin/true"}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  ExperimentSpec spec = TinySpec();
  spec.set_name(std::string(10 << 20, 'n'));
  auto result = Submit(*stub, spec);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("spec.name: at most 256 bytes, got 10485760"));
  // The same for EstimateMemory.
  grpc::ClientContext context;
  vramlab::v1::EstimateMemoryRequest estimate;
  *estimate.mutable_spec() = spec;
  vramlab::v1::MemoryEstimate prediction;
  const grpc::Status status = stub->EstimateMemory(&context, estimate, &prediction);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("spec.name"));
}

}  // namespace
}  // namespace vramlab::testing
