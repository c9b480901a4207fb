// One set of spec rules (common/spec/spec_ranges.h and the rules across fields beside it), and
// every consumer applies it the same way: for each range rule, values just outside it are refused
// by the real daemon (its validation, through EstimateMemory, which runs nothing) and by the real
// worker (exit code 2), both naming the field with the same message. The estimator and the CLI
// read their defaults from the same header; the daemon and the worker are where a value is
// accepted or refused.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/spec/device_rules.h"
#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"
#include "common/spec/spec_ranges.h"
#include "common/spec/sweep_order.h"
#include "tests/contract/worker_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using nlohmann::json;

// A valid spec for both sides; model.config.* rules get explicit tiny shapes instead of the preset.
json BaseSpec(const std::string& field) {
  json spec = {{"name", "rules"},
               {"training", {{"dtype", "FLOAT32"}, {"seq_len", 8}, {"steps", 1}}},
               {"device", "CPU"}};
  if (field.rfind("model.config.", 0) == 0) {
    spec["model"]["config"] = {{"vocab_size", 512},        {"hidden_size", 64},
                               {"intermediate_size", 176}, {"num_hidden_layers", 2},
                               {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
  } else {
    spec["model"]["preset"] = "tiny";
  }
  return spec;
}

// `spec` with `field` ("a.b.c") set to `value`.
template <typename T>
json WithField(json spec, const std::string& field, T value) {
  json* node = &spec;
  size_t start = 0;
  for (size_t dot = field.find('.'); dot != std::string::npos; dot = field.find('.', start)) {
    node = &(*node)[field.substr(start, dot - start)];
    start = dot + 1;
  }
  (*node)[field.substr(start)] = value;
  return spec;
}

struct Verdicts {
  std::string daemon;  // the daemon's INVALID_ARGUMENT message, "" if accepted
  std::string worker;  // "spec." + the worker's error, "" if accepted
};

class SpecRulesAgreementTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The operator's narrowing flags at the rules' own maxima, so that both sides judge by the
    // shared rules alone.
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1",
                         "--max-seq-len=" + std::to_string(spec_rules::kSeqLen.max),
                         "--max-steps=" + std::to_string(spec_rules::kSteps.max)},
         .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() { delete daemon_; }

  // The daemon's INVALID_ARGUMENT message for `spec`, "" if it accepts it.
  static std::string DaemonVerdict(const json& spec) {
    vramlab::v1::EstimateMemoryRequest request;
    auto parsed = google::protobuf::util::JsonStringToMessage(spec.dump(), request.mutable_spec());
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << " " << spec.dump();
    grpc::ClientContext context;
    vramlab::v1::MemoryEstimate estimate;
    grpc::Status status = daemon_->NewStub()->EstimateMemory(&context, request, &estimate);
    return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? status.error_message() : "";
  }

  // "spec." + the worker's error (its field, then its reason) for `spec` when it exits as an
  // invalid spec, else "". Only for specs the worker refuses: an accepted one would run.
  static std::string WorkerVerdict(const json& spec) {
    WorkerProcess worker = RunWorkerProcess(spec.dump());
    std::string verdict;
    for (size_t start = 0; start < worker.output.size();) {
      size_t end = worker.output.find('\n', start);
      if (end == std::string::npos) end = worker.output.size();
      json line = json::parse(worker.output.substr(start, end - start), nullptr, false);
      if (line.is_object() && line.contains("error")) {
        const std::string field = line["error"].value("field", "");
        verdict = "spec." + (field.empty() ? "" : field + ": ") +
                  line["error"]["message"].get<std::string>();
      }
      start = end + 1;
    }
    return worker.exit_status == 2 ? verdict : "";
  }

  static Verdicts Judge(const json& spec) { return {DaemonVerdict(spec), WorkerVerdict(spec)}; }

  // A tiny spec with `training` fields that only a CUDA device runs: the CPU daemon refuses it
  // with the device left to it; with the CPU named, daemon and worker refuse it in one wording.
  static void ExpectRefusedOnTheCpuAlike(const json& training, const char* field,
                                         const char* message) {
    const std::string expected = std::string("spec.") + field + ": " + message;
    json spec = {{"model", {{"preset", "tiny"}}}, {"training", {{"seqLen", 16}}}};
    spec["training"].update(training);
    EXPECT_EQ(DaemonVerdict(spec), expected);
    spec["device"] = "CPU";
    const Verdicts named = Judge(spec);
    EXPECT_EQ(named.daemon, expected);
    EXPECT_EQ(named.worker, expected);
  }

  static DaemonHarness* daemon_;
};

DaemonHarness* SpecRulesAgreementTest::daemon_ = nullptr;

TEST_F(SpecRulesAgreementTest, EveryIntegerRuleIsEnforcedAlikeByDaemonAndWorker) {
  int checked = 0;
  for (const spec_rules::IntRule& rule : spec_rules::AllIntRules()) {
    const std::string field = rule.field;
    if (field == "sweep.values") continue;  // a count of points, checked in validate_spec_test
    std::vector<int64_t> outside = {rule.max + 1};
    if (rule.min - 1 != 0) outside.push_back(rule.min - 1);  // 0 is "unset" in proto3
    for (int64_t value : outside) {
      Verdicts verdicts = Judge(WithField(BaseSpec(field), field, value));
      EXPECT_THAT(verdicts.daemon, ::testing::StartsWith("spec." + field + ": "))
          << field << " = " << value;
      EXPECT_THAT(verdicts.daemon, ::testing::HasSubstr("got " + std::to_string(value)));
      EXPECT_EQ(verdicts.worker, verdicts.daemon) << field << " = " << value;
      ++checked;
    }
  }
  EXPECT_GE(checked, 23);  // 18 rules above, 5 with a refusable value below the minimum too
}

TEST_F(SpecRulesAgreementTest, EveryRealRuleIsEnforcedAlikeByDaemonAndWorker) {
  int checked = 0;
  for (const spec_rules::RealRule& rule : spec_rules::AllRealRules()) {
    const std::string field = rule.field;
    std::vector<double> outside = {rule.max_exclusive ? rule.max : rule.max * 2 + 1};
    const double below = rule.min_exclusive && rule.min != 0 ? rule.min : rule.min - 1;
    outside.push_back(below);
    for (double value : outside) {
      Verdicts verdicts = Judge(WithField(BaseSpec(field), field, value));
      EXPECT_THAT(verdicts.daemon, ::testing::StartsWith("spec." + field + ": "))
          << field << " = " << value;
      EXPECT_EQ(verdicts.worker, verdicts.daemon) << field << " = " << value;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

TEST_F(SpecRulesAgreementTest, ValuesInsideEveryRuleAreAcceptedByTheDaemon) {
  // The worker would run them (some for hours): its acceptance of the defaults is in
  // worker/spec/spec_parser_test.
  for (const spec_rules::IntRule& rule : spec_rules::AllIntRules()) {
    const std::string field = rule.field;
    if (field == "sweep.values" || field == "model.config.num_key_value_heads") continue;
    for (int64_t value : {rule.min, rule.max}) {
      if (value == 0) continue;
      // hidden_size 1 leaves an odd head dimension, which rotary embeddings refuse.
      if (field == "model.config.hidden_size" && value == 1) continue;
      json spec = WithField(BaseSpec(field), field, value);
      if (field == "model.config.hidden_size") {
        spec["model"]["config"]["num_attention_heads"] = 1;
        spec["model"]["config"]["num_key_value_heads"] = 1;
      }
      if (field == "training.data.token_id_bound") {
        // The bound is checked against the model's vocabulary too: give it one that large.
        spec["model"] = BaseSpec("model.config.vocab_size")["model"];
        spec["model"]["config"]["vocab_size"] = std::max<int64_t>(value, 512);
      }
      if (field == "model.config.num_attention_heads") {
        spec["model"]["config"]["num_key_value_heads"] = 1;
        spec["model"]["config"]["hidden_size"] = value * 2;
        if (value * 2 > spec_rules::kHiddenSize.max) continue;
      }
      EXPECT_EQ(DaemonVerdict(spec), "") << field << " = " << value;
    }
  }
}

// The model family rules (common/spec/model_family.h): the daemon and the worker refuse the
// same configs naming the same field in the same words, and accept every family.
TEST_F(SpecRulesAgreementTest, ModelFamilyRulesAreEnforcedAlike) {
  const std::vector<std::pair<std::string, json>> refused = {
      {"model.config.model_type", "gemma"},
      {"model.config.head_dim", 15},
      {"model.config.rope_scaling.rope_type", "yarn"},
      {"model.config.rope_scaling.factor", 0.5},
      {"model.config.sliding_window", -1},
      {"model.config.attention_bias", false},  // qwen2: always q/k/v bias
      {"model.config.mlp_bias", true},         // qwen2: no MLP bias
  };
  for (const auto& [field, value] : refused) {
    json spec = WithField(BaseSpec(field), field, value);
    if (field == "model.config.rope_scaling.factor")
      spec["model"]["config"]["rope_scaling"]["rope_type"] = "llama3";
    const Verdicts verdicts = Judge(spec);
    EXPECT_THAT(verdicts.daemon, ::testing::StartsWith("spec." + field + ": ")) << field;
    EXPECT_EQ(verdicts.worker, verdicts.daemon) << field;
  }
  for (const char* family : {"llama", "mistral", "qwen3"}) {
    json spec = WithField(BaseSpec("model.config.model_type"), "model.config.model_type", family);
    EXPECT_EQ(DaemonVerdict(spec), "") << family;
  }
}

// FUSED kernels on a CPU daemon, with the device named or left to the daemon (the worker then
// finds no CUDA device): both refuse it naming training.kernels, in the same words.
TEST_F(SpecRulesAgreementTest, FusedKernelsOnTheCpuAreRefusedAlike) {
  ExpectRefusedOnTheCpuAlike({{"kernels", "FUSED"}}, spec_rules::kKernelsField,
                             spec_rules::kFusedKernelsNeedCudaMessage);
}

// FLOAT16 on a CPU daemon: LibTorch's CPU build has no half-precision matrix products, so both
// refuse it naming training.dtype instead of the worker failing mid-step.
TEST_F(SpecRulesAgreementTest, Float16OnTheCpuIsRefusedAlike) {
  ExpectRefusedOnTheCpuAlike({{"dtype", "FLOAT16"}}, spec_rules::kDtypeField,
                             spec_rules::kFloat16NeedsCudaMessage);
}

// An in-backward update over two ranks: the daemon refuses it at submit, as the worker would,
// naming the field once.
TEST_F(SpecRulesAgreementTest, InBackwardOverRanksIsRefusedAlike) {
  const std::string expected = std::string("spec.") + spec_rules::kInBackwardField + ": " +
                               spec_rules::kInBackwardParallelMessage;
  json spec = {{"model", {{"preset", "tiny"}}},
               {"training", {{"seqLen", 16}, {"optimizer", {{"inBackward", true}}}}},
               {"parallel", {{"worldSize", 2}, {"sharding", "SHARD_NONE"}}},
               {"device", "CPU"}};
  const Verdicts verdicts = Judge(spec);
  EXPECT_EQ(verdicts.daemon, expected);
  EXPECT_EQ(verdicts.worker, expected);
}

// training.optimizer.delayed_update without offload, with an in-backward update and over two
// ranks: both refuse each naming the field, in common/spec's words (the two-rank spec before the
// daemon compares the ranks with its one CPU slot).
TEST_F(SpecRulesAgreementTest, DelayedUpdateCombinationsAreRefusedAlike) {
  const std::string field = std::string("spec.") + spec_rules::kDelayedUpdateField + ": ";
  const json base = BaseSpec("training.optimizer.delayed_update");
  struct Case {
    json optimizer;
    int world_size;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"delayedUpdate", true}}, 0, spec_rules::kDelayedUpdateNeedsOffloadMessage},
      {{{"delayedUpdate", true}, {"offloadToCpu", true}, {"inBackward", true}},
       0,
       spec_rules::kDelayedUpdateWithInBackwardMessage},
      {{{"delayedUpdate", true}, {"offloadToCpu", true}},
       2,
       spec_rules::kDelayedUpdateParallelMessage}};
  for (const Case& c : cases) {
    json spec = base;
    spec["training"]["optimizer"] = c.optimizer;
    if (c.world_size > 0) spec["parallel"]["worldSize"] = c.world_size;
    const Verdicts verdicts = Judge(spec);
    EXPECT_EQ(verdicts.daemon, field + c.message) << spec.dump();
    EXPECT_EQ(verdicts.worker, verdicts.daemon) << spec.dump();
  }
}

// SHARD_FULL's own switches away from their defaults (reshard_after_forward on, prefetch off) with
// another sharding: both refuse each naming its field, in common/spec's words; the defaults
// stated explicitly are no refusal for either (the daemon's verdict; the worker would run them).
TEST_F(SpecRulesAgreementTest, FullShardingSwitchesWithAnotherShardingAreRefusedAlike) {
  json base = BaseSpec("parallel.sharding");
  base["parallel"] = {{"worldSize", 2}, {"sharding", "SHARD_GRADIENTS"}};
  const std::vector<std::pair<const char*, json>> refused = {
      {spec_rules::kReshardAfterForwardField, {{"reshardAfterForward", true}}},
      {spec_rules::kPrefetchField, {{"prefetch", !spec_rules::kDefaultPrefetch}}}};
  for (const auto& [field, setting] : refused) {
    json spec = base;
    spec["parallel"].update(setting);
    const Verdicts verdicts = Judge(spec);
    EXPECT_EQ(verdicts.daemon,
              std::string("spec.") + field + ": " + spec_rules::kFullShardingOnlyMessage)
        << spec.dump();
    EXPECT_EQ(verdicts.worker, verdicts.daemon) << spec.dump();
  }
  json stated = base;
  stated["parallel"]["prefetch"] = spec_rules::kDefaultPrefetch;
  stated["parallel"]["reshardAfterForward"] = false;
  EXPECT_EQ(DaemonVerdict(stated), "") << stated.dump();
}

// A parallel spec with a sweep: the daemon accepts it (it runs each point as its own gang of ranks,
// each rank told its point with --sweep-point); the real worker, started as a rank without that
// flag, refuses it naming `sweep` in common/spec's words, before it touches a device or the
// rendezvous, and so it does a point the sweep does not run.
TEST_F(SpecRulesAgreementTest, AParallelSweepIsAcceptedAndItsRanksNeedTheirPoint) {
  json spec = BaseSpec("sweep");
  spec["parallel"]["worldSize"] = 2;
  spec["sweep"] = {{"variable", "SEQ_LEN"}, {"values", {8, 16}}};
  EXPECT_EQ(DaemonVerdict(spec), "");
  const std::vector<std::string> rank = {"--rank", "0", "--rendezvous", "127.0.0.1:1"};
  auto refusal = [&spec](const std::vector<std::string>& args) {
    const WorkerProcess worker = RunWorkerProcess(spec.dump(), nullptr, args);
    EXPECT_EQ(worker.exit_status, 2) << worker.output;
    const json line =
        json::parse(worker.output.substr(0, worker.output.find('\n')), nullptr, false);
    if (!line.is_object() || !line.contains("error")) {
      ADD_FAILURE() << "no error event: " << worker.output;
      return std::string();
    }
    EXPECT_EQ(line["error"]["field"], spec_rules::kSweepField) << worker.output;
    return line["error"]["message"].get<std::string>();
  };
  EXPECT_EQ(refusal(rank), spec_rules::kParallelSweepNeedsPointMessage);
  std::vector<std::string> wrong_point = rank;
  wrong_point.insert(wrong_point.end(), {spec_rules::kSweepPointFlag, "1:8"});
  EXPECT_EQ(refusal(wrong_point), "--sweep-point 1:8 is not a point of this spec's sweep");
}

// The rules that span fields, one spec each: the daemon (through EstimateMemory) and the real
// worker refuse it with the same words, naming the field exactly once.
TEST_F(SpecRulesAgreementTest, EveryCrossFieldRuleIsRefusedAlikeNamingItsFieldOnce) {
  struct Case {
    const char* field;
    json spec;
  };
  const json tiny = {{"preset", "tiny"}};
  const json shapes = {{"vocab_size", 512},
                       {"hidden_size", 64},
                       {"intermediate_size", 176},
                       {"num_hidden_layers", 2},
                       {"num_attention_heads", 4}};
  auto with = [](json spec, const json& patch) {
    spec.merge_patch(patch);
    return spec;
  };
  const json base = {
      {"model", tiny}, {"training", {{"seqLen", 8}, {"dtype", "FLOAT32"}}}, {"device", "CPU"}};
  const std::vector<Case> cases = {
      {"model.preset", with(base, {{"model", {{"preset", "tinny"}}}})},
      {"model.config.num_key_value_heads",
       with(base,
            {{"model",
              {{"preset", nullptr}, {"config", with(shapes, {{"num_key_value_heads", 3}})}}}})},
      {"model.config.hidden_size",
       with(base,
            {{"model", {{"preset", nullptr}, {"config", with(shapes, {{"hidden_size", 66}})}}}})},
      {"training.optimizer.in_backward",
       with(base, {{"training", {{"gradAccumSteps", 2}, {"optimizer", {{"inBackward", true}}}}}})},
      {"training.dtype", with(base, {{"training", {{"adapter", {{"kind", "QLORA"}}}}}})},
      {"training.adapter.rank",
       with(base, {{"training", {{"adapter", {{"kind", "LORA"}, {"rank", 65}}}}}})},
      {"training.data.token_id_bound",
       with(base, {{"training", {{"data", {{"tokenIdBound", 513}}}}}})},
      {"parallel.sharding", with(base, {{"parallel", {{"sharding", "SHARD_OPTIMIZER"}}}})},
      {"sweep.values", with(base, {{"sweep", {{"variable", "SEQ_LEN"}}}})},
      {"sweep.variable", with(base, {{"sweep", {{"values", {8, 16}}}}})},
      {"sweep.search_granularity", with(base, {{"sweep",
                                                {{"variable", "SEQ_LEN"},
                                                 {"mode", "SEARCH_MAX"},
                                                 {"searchMin", 9},
                                                 {"searchMax", 15},
                                                 {"searchGranularity", 16}}}})},
  };
  for (const Case& c : cases) {
    const Verdicts verdicts = Judge(c.spec);
    const std::string prefix = std::string("spec.") + c.field + ": ";
    EXPECT_THAT(verdicts.daemon, ::testing::StartsWith(prefix)) << c.spec.dump();
    EXPECT_EQ(verdicts.daemon.find(c.field, prefix.size()), std::string::npos)
        << "the field is named twice: " << verdicts.daemon;
    EXPECT_EQ(verdicts.worker, verdicts.daemon) << c.spec.dump();
  }
}

}  // namespace
}  // namespace vramlab::testing
