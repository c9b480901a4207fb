// `vramlab estimate/submit --model-config FILE` against a real vramlabd on loopback with the real
// worker (CPU): the tiny HF config.json of each family in testdata/ (saved by transformers) gives
// the same prediction, and the same run, as the spec that spells its shapes out field by field;
// bad files are exit 2 at the client and bad model.config fields INVALID_ARGUMENT at the daemon.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kTestdata = VRAMLAB_TESTDATA_DIR;

// A family's testdata checkpoint and its config.json's shapes written out as a spec's
// model.config (canonical JSON) by hand.
struct Family {
  std::string dir;
  std::string fields;
};

const std::vector<Family>& Families() {
  static const auto* families = new std::vector<Family>{
      {"qwen2-tiny",
       R"("modelType": "qwen2", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
          "numHiddenLayers": 2, "numAttentionHeads": 4, "numKeyValueHeads": 2,
          "maxPositionEmbeddings": 256, "ropeTheta": 1000000, "rmsNormEps": 1e-6,
          "tieWordEmbeddings": true, "maxWindowLayers": 28)"},
      {"llama-tiny",
       R"("modelType": "llama", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
          "numHiddenLayers": 2, "numAttentionHeads": 4, "numKeyValueHeads": 2, "headDim": 16,
          "maxPositionEmbeddings": 2048, "ropeTheta": 10000, "rmsNormEps": 1e-5,
          "attentionBias": false, "mlpBias": false,
          "ropeScaling": {"ropeType": "llama3", "factor": 8, "lowFreqFactor": 1,
                          "highFreqFactor": 4, "originalMaxPositionEmbeddings": 256})"},
      {"mistral-tiny",
       R"("modelType": "mistral", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
          "numHiddenLayers": 2, "numAttentionHeads": 4, "numKeyValueHeads": 2, "headDim": 16,
          "maxPositionEmbeddings": 256, "ropeTheta": 1000000, "rmsNormEps": 1e-5,
          "slidingWindow": 8)"},
      {"qwen3-tiny",
       R"("modelType": "qwen3", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
          "numHiddenLayers": 2, "numAttentionHeads": 4, "numKeyValueHeads": 2, "headDim": 32,
          "maxPositionEmbeddings": 256, "ropeTheta": 1000000, "rmsNormEps": 1e-6,
          "tieWordEmbeddings": true, "attentionBias": false)"},
  };
  return *families;
}

std::string ConfigPath(const Family& family) {
  return kTestdata + "/" + family.dir + "/config.json";
}

// HF's num_parameters() of the checkpoint, as testdata/make_family_reference.py recorded it.
int64_t HfParameterCount(const Family& family) {
  google::protobuf::Struct expected;
  EXPECT_TRUE(ParseJson(ReadWholeFile(kTestdata + "/" + family.dir + "/expected.json"), expected));
  return static_cast<int64_t>(expected.fields().at("param_count").number_value());
}

// A spec file whose model.config spells out the family's shapes.
std::string FieldsSpec(const Family& family) {
  const std::string path = TempPath(family.dir + "-fields.json");
  std::ofstream(path) << "{\"model\": {\"config\": {" << family.fields << "}}}";
  return path;
}

class CliModelConfigTest : public SharedDaemonTest<CliModelConfigTest> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=2"}; }

 protected:
  static CliResult Run(std::vector<std::string> args) {
    args.push_back("--addr=" + daemon_->address());
    return RunCli(args);
  }
  static vramlab::v1::MemoryEstimate Estimate(std::vector<std::string> args) {
    args.insert(args.begin(), "estimate");
    args.push_back("--json");
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    vramlab::v1::MemoryEstimate estimate;
    EXPECT_TRUE(ParseJson(r.out, estimate)) << Describe(r);
    return estimate;
  }
  // Submits, waits, and returns the finished experiment.
  static vramlab::v1::Experiment SubmitAndShow(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    args.push_back("--wait");
    CliResult submitted = Run(args);
    EXPECT_EQ(submitted.exit_code, 0) << Describe(submitted);
    const std::vector<std::string> lines = submitted.OutLines();
    vramlab::v1::Experiment experiment;
    if (lines.empty()) return experiment;
    CliResult shown = Run({"show", lines[0], "--json"});
    EXPECT_EQ(shown.exit_code, 0) << Describe(shown);
    EXPECT_TRUE(ParseJson(shown.out, experiment)) << Describe(shown);
    return experiment;
  }
};

// Two trainings per family: a full fine-tune in eager attention at a sequence longer than the
// mistral window, and LoRA with sdpa and checkpointing.
const std::vector<std::vector<std::string>> kTrainings = {
    {"--dtype", "fp32", "--attention", "eager", "--seq-len", "32", "--micro-batch", "2",
     "--memory-limit", "64MiB"},
    {"--dtype", "fp32", "--attention", "sdpa", "--checkpointing", "all", "--lora", "default",
     "--seq-len", "64", "--memory-limit", "64MiB"},
};

TEST_F(CliModelConfigTest, EstimateEqualsTheSpecWithTheSameFields) {
  for (const Family& family : Families()) {
    for (const std::vector<std::string>& training : kTrainings) {
      SCOPED_TRACE(family.dir + " " + training[3]);
      std::vector<std::string> from_file = {"--model-config", ConfigPath(family)};
      std::vector<std::string> from_fields = {"--spec", FieldsSpec(family)};
      from_file.insert(from_file.end(), training.begin(), training.end());
      from_fields.insert(from_fields.end(), training.begin(), training.end());
      const vramlab::v1::MemoryEstimate file_estimate = Estimate(from_file);
      const vramlab::v1::MemoryEstimate fields_estimate = Estimate(from_fields);
      EXPECT_EQ(file_estimate.parameter_count(), HfParameterCount(family));
      EXPECT_GT(file_estimate.predicted_peak_bytes(), 0);
      EXPECT_EQ(file_estimate.predicted_peak_bytes(), fields_estimate.predicted_peak_bytes());
      EXPECT_EQ(file_estimate.verdict(), fields_estimate.verdict());
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(file_estimate.anatomy(),
                                                                     fields_estimate.anatomy()))
          << file_estimate.anatomy().DebugString() << "\nvs\n"
          << fields_estimate.anatomy().DebugString();
    }
  }
}

// qwen2-tiny is the `tiny` preset's shapes: the preset and the file predict the same.
TEST_F(CliModelConfigTest, EstimateEqualsThePresetWithTheSameShapes) {
  const std::vector<std::string>& training = kTrainings[0];
  std::vector<std::string> from_file = {"--model-config", ConfigPath(Families()[0])};
  std::vector<std::string> from_preset = {"--preset", "tiny"};
  from_file.insert(from_file.end(), training.begin(), training.end());
  from_preset.insert(from_preset.end(), training.begin(), training.end());
  const vramlab::v1::MemoryEstimate file_estimate = Estimate(from_file);
  const vramlab::v1::MemoryEstimate preset_estimate = Estimate(from_preset);
  EXPECT_EQ(file_estimate.parameter_count(), preset_estimate.parameter_count());
  EXPECT_EQ(file_estimate.predicted_peak_bytes(), preset_estimate.predicted_peak_bytes());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(file_estimate.anatomy(),
                                                                 preset_estimate.anatomy()));
  // "-" reads the config.json from stdin.
  std::vector<std::string> from_stdin = {"estimate", "--model-config", "-", "--json",
                                         "--addr=" + daemon_->address()};
  from_stdin.insert(from_stdin.end(), training.begin(), training.end());
  CliResult piped = RunShell(CliCommand(from_stdin, {}) + " < " + ShellQuote(from_file[1]));
  ASSERT_EQ(piped.exit_code, 0) << Describe(piped);
  vramlab::v1::MemoryEstimate stdin_estimate;
  ASSERT_TRUE(ParseJson(piped.out, stdin_estimate)) << Describe(piped);
  EXPECT_EQ(stdin_estimate.predicted_peak_bytes(), file_estimate.predicted_peak_bytes());
}

// The worker builds the same model from the file's config as from the fields: the same measured
// peak and, from the same seeded init and data, the same loss.
TEST_F(CliModelConfigTest, SubmitRunsTheSameModelAsTheFields) {
  const std::vector<std::string> training = {"--dtype",   "fp32", "--attention", "eager",
                                             "--seq-len", "32",   "--steps",     "1"};
  for (const Family& family : Families()) {
    SCOPED_TRACE(family.dir);
    std::vector<std::string> from_file = {"--model-config", ConfigPath(family)};
    std::vector<std::string> from_fields = {"--spec", FieldsSpec(family)};
    from_file.insert(from_file.end(), training.begin(), training.end());
    from_fields.insert(from_fields.end(), training.begin(), training.end());
    const vramlab::v1::Experiment file_run = SubmitAndShow(from_file);
    const vramlab::v1::Experiment fields_run = SubmitAndShow(from_fields);
    EXPECT_EQ(file_run.state(), vramlab::v1::Experiment::SUCCEEDED) << file_run.state_reason();
    EXPECT_EQ(file_run.spec().model().config().model_type(),
              family.dir.substr(0, family.dir.find('-')));
    EXPECT_EQ(file_run.report().parameter_count(), HfParameterCount(family));
    EXPECT_GT(file_run.report().anatomy().peak_allocated_bytes(), 0);
    EXPECT_EQ(file_run.report().anatomy().peak_allocated_bytes(),
              fields_run.report().anatomy().peak_allocated_bytes());
    EXPECT_GT(file_run.report().final_loss(), 0);
    EXPECT_EQ(file_run.report().final_loss(), fields_run.report().final_loss());
  }
}

// A file the reader refuses never reaches the daemon: exit 2, one line naming the flag, the file
// and the JSON key.
TEST_F(CliModelConfigTest, BadFilesAreExit2NamingTheFileAndKey) {
  const std::string gemma = TempPath("gemma.json");
  std::ofstream(gemma) << R"({"model_type": "gemma", "vocab_size": 512, "hidden_size": 64})";
  const std::string heads = TempPath("heads.json");
  std::ofstream(heads) << R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64,
      "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 3})";
  const std::string missing = TempPath("missing.json");
  std::ofstream(missing) << R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64})";
  struct Case {
    std::vector<std::string> args;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {{"estimate", "--model-config", gemma},
       "--model-config " + gemma +
           ": model config: unsupported model_type \"gemma\"; supported: qwen2, llama, mistral, "
           "qwen3"},
      {{"submit", "--model-config", heads},
       "--model-config " + heads +
           ": llama config: num_key_value_heads: (3) must divide num_attention_heads (4)"},
      {{"estimate", "--model-config", missing},
       "--model-config " + missing + ": qwen3 config: missing intermediate_size"},
      {{"submit", "--model-config", TempPath("absent.json")},
       "--model-config: cannot read " + TempPath("absent.json")},
      {{"estimate", "--preset", "tiny", "--model-config", ConfigPath(Families()[1])},
       "--model-config and --preset both give the model's shapes; pass one"},
  };
  for (const Case& c : cases) {
    CliResult r = Run(c.args);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_THAT(r.err, StartsWith("vramlab: INVALID_ARGUMENT: ")) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(c.detail)) << Describe(r);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << Describe(r);
  }
}

// A spec's model.config that bypasses the reader (a --spec file) is refused by the daemon at
// submit and estimate, naming the spec field: INVALID_ARGUMENT, exit 2, nothing queued.
TEST_F(CliModelConfigTest, TheDaemonRefusesBadConfigFieldsAtSubmit) {
  const std::string shapes =
      R"("vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176, "numHiddenLayers": 2,
         "numAttentionHeads": 4)";
  struct Case {
    std::string extra;
    std::string error;
  };
  const std::vector<Case> cases = {
      {R"("modelType": "gemma")",
       "spec.model.config.model_type: unsupported model_type \"gemma\"; supported: qwen2, llama, "
       "mistral, qwen3"},
      {R"("modelType": "llama", "ropeScaling": {"ropeType": "yarn"})",
       "spec.model.config.rope_scaling.rope_type: unsupported rope_type \"yarn\"; supported: "
       "default, llama3"},
      {R"("modelType": "qwen3", "numKeyValueHeads": 3)",
       "spec.model.config.num_key_value_heads: (3) must divide num_attention_heads (4)"},
      {R"("modelType": "llama", "ropeScaling": {"ropeType": "llama3", "factor": 8})",
       "spec.model.config.rope_scaling.low_freq_factor: must be positive for rope_type llama3"},
  };
  CliResult before = Run({"ls", "--json"});
  for (const Case& c : cases) {
    const std::string path = TempPath("bad-fields.json");
    std::ofstream(path) << "{\"model\": {\"config\": {" << shapes << ", " << c.extra << "}}}";
    for (const char* command : {"submit", "estimate"}) {
      CliResult r = Run({command, "--spec", path});
      EXPECT_EQ(r.exit_code, 2) << Describe(r);
      EXPECT_EQ(r.err, "vramlab: INVALID_ARGUMENT: " + c.error + "\n") << command;
    }
  }
  CliResult after = Run({"ls", "--json"});
  EXPECT_EQ(before.out, after.out);
}

}  // namespace
}  // namespace vramlab::cli_test
