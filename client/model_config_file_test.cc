#include "client/model_config_file.h"

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "client/spec_builder.h"
#include "common/spec/model_family.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = std::string(VRAMLAB_SOURCE_DIR) + "/testdata";

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// A config.json of a tiny qwen2 model in transformers 4.x's layout.
nlohmann::json TinyJson() {
  return {{"model_type", "qwen2"},          {"vocab_size", 512},      {"hidden_size", 64},
          {"intermediate_size", 176},       {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2},       {"rope_theta", 10000.0},  {"tie_word_embeddings", true},
          {"max_position_embeddings", 128}, {"hidden_act", "silu"}};
}

// The error of reading `json` written to a file named `name`: INVALID_ARGUMENT naming the flag
// and the file.
std::string ErrorOf(const std::string& name, const std::string& text) {
  const std::string path = WriteTemp(name, text);
  auto config = ReadModelConfigFile(path);
  EXPECT_FALSE(config.ok()) << "accepted " << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("--model-config " + path + ": ")) << message;
  return message;
}

// Every testdata checkpoint of a family (saved by transformers) reads into a model.config whose
// decoder has exactly the parameters HF counted for it.
TEST(ReadModelConfigFileTest, EveryFamilyCheckpointHasHfsParameterCount) {
  for (const std::string dir :
       {"qwen2-tiny", "qwen2-tiny-untied", "qwen2-tiny-window", "llama-tiny", "llama-tiny-bias",
        "mistral-tiny", "qwen3-tiny", "qwen3-tiny-window"}) {
    SCOPED_TRACE(dir);
    auto config = ReadModelConfigFile(kTestdata + "/" + dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    spec_rules::DecoderConfig decoder;
    const spec_rules::FieldError error =
        spec_rules::ResolveDecoderConfig(plain::FromProto(*config), &decoder);
    ASSERT_TRUE(error.ok()) << error.field << ": " << error.message;
    const nlohmann::json expected = ReadJson(kTestdata + "/" + dir + "/expected.json");
    EXPECT_EQ(decoder.ParameterCount(), expected.at("param_count").get<int64_t>());
    EXPECT_EQ(config->model_type(), ReadJson(kTestdata + "/" + dir + "/config.json")["model_type"]);
  }
}

TEST(ReadModelConfigFileTest, CarriesEveryFamilyFeature) {
  auto llama = ReadModelConfigFile(kTestdata + "/llama-tiny/config.json");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->rope_scaling().rope_type(), "llama3");  // transformers 5.x's rope_parameters
  EXPECT_DOUBLE_EQ(llama->rope_scaling().factor(), 8.0);
  EXPECT_EQ(llama->rope_scaling().original_max_position_embeddings(), 256);
  EXPECT_DOUBLE_EQ(llama->rope_theta(), 10000.0);
  EXPECT_DOUBLE_EQ(llama->rms_norm_eps(), 1e-5);
  EXPECT_EQ(llama->max_position_embeddings(), 2048);
  EXPECT_TRUE(llama->has_attention_bias());
  EXPECT_FALSE(llama->attention_bias());
  auto mistral = ReadModelConfigFile(kTestdata + "/mistral-tiny/config.json");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->sliding_window(), 8);
  auto qwen3 = ReadModelConfigFile(kTestdata + "/qwen3-tiny-window/config.json");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_EQ(qwen3->head_dim(), 32);
  EXPECT_TRUE(qwen3->use_sliding_window());
  EXPECT_TRUE(qwen3->has_max_window_layers());
  EXPECT_EQ(qwen3->max_window_layers(), 1);
}

TEST(ReadModelConfigFileTest, UnreadableFile) {
  const std::string path = ::testing::TempDir() + "/no-such-config.json";
  auto config = ReadModelConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("--model-config: cannot read " + path));
  auto directory = ReadModelConfigFile(::testing::TempDir());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(), HasSubstr("not a regular file"));
}

TEST(ReadModelConfigFileTest, InvalidJsonGivesThePositionNotTheText) {
  const std::string message = ErrorOf("broken.json", "{\"vocab_size\": 512,\n  secret }");
  EXPECT_THAT(message, HasSubstr("not JSON (syntax error at byte 23)"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(ErrorOf("array.json", "[1, 2]"), HasSubstr("model config: expected a JSON object"));
}

TEST(ReadModelConfigFileTest, UnsupportedModelTypeNamesItAndTheSupportedOnes) {
  nlohmann::json json = TinyJson();
  json["model_type"] = "gemma";
  EXPECT_THAT(
      ErrorOf("gemma.json", json.dump()),
      HasSubstr("unsupported model_type \"gemma\"; supported: qwen2, llama, mistral, qwen3"));
  json["model_type"] = 7;
  EXPECT_THAT(ErrorOf("type-number.json", json.dump()),
              HasSubstr("model_type must be a string, got 7"));
}

TEST(ReadModelConfigFileTest, UnknownRopeTypeNamesIt) {
  nlohmann::json json = TinyJson();
  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(ErrorOf("yarn.json", json.dump()),
              HasSubstr("qwen2 config: rope_scaling.rope_type: unsupported rope_type \"yarn\""));
  json.erase("rope_scaling");
  json["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}};
  EXPECT_THAT(ErrorOf("dynamic.json", json.dump()),
              HasSubstr("rope_scaling.rope_type: unsupported rope_type \"dynamic\""));
}

TEST(ReadModelConfigFileTest, MissingRequiredFieldNamesIt) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads"}) {
    nlohmann::json json = TinyJson();
    json.erase(key);
    EXPECT_THAT(ErrorOf("missing.json", json.dump()),
                HasSubstr(std::string("qwen2 config: missing ") + key));
  }
  nlohmann::json llama = ReadJson(kTestdata + "/llama-tiny/config.json");
  llama["rope_parameters"].erase("original_max_position_embeddings");
  EXPECT_THAT(ErrorOf("llama3-missing.json", llama.dump()),
              HasSubstr("llama config: rope_scaling.original_max_position_embeddings: must be "
                        "positive"));
}

TEST(ReadModelConfigFileTest, HeadCountsThatDoNotDivideNameBoth) {
  nlohmann::json json = TinyJson();
  json["num_key_value_heads"] = 3;
  EXPECT_THAT(ErrorOf("kv-heads.json", json.dump()),
              HasSubstr("num_key_value_heads: (3) must divide num_attention_heads (4)"));
  json = TinyJson();
  json["num_attention_heads"] = 5;
  json["num_key_value_heads"] = 1;
  EXPECT_THAT(ErrorOf("heads.json", json.dump()),
              HasSubstr("qwen2 config: hidden_size: (64) must be a multiple of "
                        "num_attention_heads (5)"));
}

TEST(ReadModelConfigFileTest, ValuesOfTheWrongKindOrRangeNameTheKey) {
  nlohmann::json json = TinyJson();
  json["num_hidden_layers"] = "2";
  EXPECT_THAT(ErrorOf("kind.json", json.dump()),
              HasSubstr("qwen2 config: num_hidden_layers must be an integer"));
  json = TinyJson();
  json["vocab_size"] = 1000000000000LL;
  EXPECT_THAT(ErrorOf("range.json", json.dump()),
              HasSubstr("vocab_size must be between 1 and 1048576, got 1000000000000"));
  json = TinyJson();
  json["hidden_act"] = "gelu";
  EXPECT_THAT(ErrorOf("act.json", json.dump()), HasSubstr("only hidden_act \"silu\""));
  json = TinyJson();
  json["model_type"] = "llama";
  json["mlp_bias"] = "yes";
  EXPECT_THAT(ErrorOf("bias.json", json.dump()),
              HasSubstr("llama config: mlp_bias must be a boolean"));
}

absl::StatusOr<vramlab::v1::ExperimentSpec> Build(const std::vector<std::string>& argv) {
  FlagSet flags("submit", "test");
  AddSpecFlags(flags);
  auto parsed = flags.Parse(argv);
  if (!parsed.ok()) return parsed.status();
  return BuildSpec(*parsed);
}

TEST(ModelConfigFlagTest, SetsTheConfigAndReplacesASpecFilesPreset) {
  const std::string spec = WriteTemp("preset-spec.json", R"({"model": {"preset": "tiny"}})");
  auto built = Build({"--spec", spec, "--model-config", kTestdata + "/qwen3-tiny/config.json"});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->model().preset(), "");
  EXPECT_EQ(built->model().config().model_type(), "qwen3");
  EXPECT_EQ(built->model().config().hidden_size(), 64);
}

TEST(ModelConfigFlagTest, APresetReplacesASpecFilesConfig) {
  const std::string spec = WriteTemp("config-spec.json", R"({"model": {"config": {"vocab_size": 512,
        "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
        "num_attention_heads": 4}}})");
  auto built = Build({"--spec", spec, "--preset", "qwen2.5-0.5b"});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->model().preset(), "qwen2.5-0.5b");
  EXPECT_FALSE(built->model().has_config());
}

TEST(ModelConfigFlagTest, WithPresetIsRefused) {
  auto built = Build({"--preset", "tiny", "--model-config", kTestdata + "/llama-tiny/config.json"});
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(),
              HasSubstr("--model-config and --preset both give the model's shapes; pass one"));
}

}  // namespace
}  // namespace vramlab::client
