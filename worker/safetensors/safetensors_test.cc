// The safetensors reader and the snapshot loader, on well-formed files and on every malformation
// they must reject with a LoadError naming the file and tensor.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/model/init.h"
#include "worker/model/qwen2_model.h"
#include "worker/safetensors/loader.h"
#include "worker/safetensors/safetensors_file.h"
#include "worker/safetensors/safetensors_writer.h"
#include "worker/util/file_paths.h"

namespace vramlab::worker {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = "/tmp/safetensors_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { RemoveTree(dir_); }

  // A file with exactly these bytes: length prefix, header text, data.
  std::string WriteRaw(const std::string& name, uint64_t header_length, const std::string& header,
                       const std::string& data) {
    const std::string path = JoinPath(dir_, name);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&header_length), sizeof(header_length));
    out << header << data;
    return path;
  }
  std::string WriteRaw(const std::string& name, const std::string& header,
                       const std::string& data) {
    return WriteRaw(name, header.size(), header, data);
  }

  // Expects `fn` to throw a LoadError whose message contains every fragment.
  template <typename Fn>
  void ExpectLoadError(Fn fn, const std::vector<std::string>& fragments) {
    try {
      fn();
      ADD_FAILURE() << "no LoadError";
    } catch (const LoadError& e) {
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
            << "\"" << fragment << "\" not in: " << e.what();
      }
    }
  }
  void ExpectOpenError(const std::string& path, std::vector<std::string> fragments) {
    fragments.push_back(path);
    ExpectLoadError([&] { SafetensorsFile::Open(path); }, fragments);
  }

  std::string dir_;
};

TEST_F(SafetensorsTest, RoundTripKeepsValuesDtypesAndMetadata) {
  const torch::Tensor f32 = torch::randn({3, 5});
  const torch::Tensor bf16 = torch::randn({7}).to(torch::kBFloat16);
  const torch::Tensor i64 = torch::arange(6, torch::kInt64).view({2, 3});
  const torch::Tensor empty = torch::zeros({0, 4});
  const std::string path = JoinPath(dir_, "t.safetensors");
  WriteSafetensors(path, {{"f32", f32}, {"bf16", bf16}, {"i64", i64}, {"empty", empty}},
                   {{"format", "pt"}});
  auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->entries().at("bf16").dtype, "BF16");
  auto tensors = ReadAllTensors(path);
  EXPECT_TRUE(torch::equal(tensors.at("f32"), f32));
  EXPECT_TRUE(torch::equal(tensors.at("bf16"), bf16));
  EXPECT_TRUE(torch::equal(tensors.at("i64"), i64));
  EXPECT_EQ(tensors.at("empty").sizes(), empty.sizes());
}

TEST_F(SafetensorsTest, ReadsUnalignedData) {
  // A 5-byte header puts the float data at offset 13: not 4-byte aligned inside the mapping.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((4 - (header.size() + 8) % 4) % 4 + 1, ' ');
  const float values[2] = {1.5f, -2.25f};
  const std::string path = WriteRaw("unaligned.safetensors", padded,
                                    std::string(reinterpret_cast<const char*>(values), 8));
  const torch::Tensor x = ReadAllTensors(path).at("x");
  EXPECT_FLOAT_EQ(x[0].item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(x[1].item<float>(), -2.25f);
}

TEST_F(SafetensorsTest, RejectsTruncatedFile) {
  const std::string empty = JoinPath(dir_, "empty.safetensors");
  std::ofstream{empty};
  ExpectOpenError(empty, {"truncated", "0 bytes"});
  const std::string path = JoinPath(dir_, "three.safetensors");
  std::ofstream(path) << "abc";
  ExpectOpenError(path, {"truncated", "3 bytes"});
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastEnd) {
  ExpectOpenError(WriteRaw("long.safetensors", 1000, "{}", ""), {"header length 1000"});
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  ExpectOpenError(WriteRaw("json.safetensors", "{\"x\": [1, 2", ""), {"not valid JSON"});
  ExpectOpenError(WriteRaw("array.safetensors", "[1, 2]", ""), {"not a JSON object"});
  ExpectOpenError(WriteRaw("entry.safetensors", R"({"x": 3})", ""), {"\"x\"", "not an object"});
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  ExpectOpenError(WriteRaw("dtype.safetensors",
                           R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", "x"),
                  {"\"w\"", "dtype \"Q7\""});
}

TEST_F(SafetensorsTest, RejectsOffsetsPastTheData) {
  ExpectOpenError(
      WriteRaw("range.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
               std::string(8, '\0')),
      {"\"w\"", "past the end"});
}

TEST_F(SafetensorsTest, RejectsTruncatedData) {
  const std::string path = JoinPath(dir_, "cut.safetensors");
  WriteSafetensors(path, {{"a", torch::ones({4})}, {"b", torch::ones({4})}});
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(::truncate(path.c_str(), st.st_size - 4), 0);
  ExpectOpenError(path, {"\"b\"", "past the end"});
}

TEST_F(SafetensorsTest, RejectsOverlappingOffsets) {
  ExpectOpenError(WriteRaw("overlap.safetensors",
                           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::string(12, '\0')),
                  {"\"b\"", "overlap", "\"a\""});
}

TEST_F(SafetensorsTest, RejectsHolesAndReversedOffsets) {
  ExpectOpenError(WriteRaw("hole.safetensors",
                           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                           std::string(12, '\0')),
                  {"\"b\"", "hole"});
  ExpectOpenError(
      WriteRaw("reversed.safetensors", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})",
               std::string(4, '\0')),
      {"\"a\"", "reversed"});
}

TEST_F(SafetensorsTest, RejectsSizeDisagreeingWithShape) {
  ExpectOpenError(
      WriteRaw("size.safetensors", R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})",
               std::string(8, '\0')),
      {"\"w\"", "need 6"});
  ExpectOpenError(
      WriteRaw("neg.safetensors", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
               std::string(4, '\0')),
      {"\"w\"", "non-negative"});
  // A shape whose byte count overflows 64 bits must not wrap around to the real size.
  ExpectOpenError(WriteRaw("huge.safetensors",
                           R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],)"
                           R"("data_offsets":[0,0]}})",
                           ""),
                  {"\"w\"", "need"});
}

TEST_F(SafetensorsTest, MissingFileIsLoadError) {
  ExpectOpenError(JoinPath(dir_, "absent.safetensors"), {"cannot open"});
}

// Loader tests: a tiny model's weights written as a snapshot directory.
class LoaderTest : public SafetensorsTest {
 protected:
  static DecoderConfig TinyConfig(bool tied) {
    DecoderConfig config = PresetConfig("tiny");
    config.tie_word_embeddings = tied;
    return config;
  }
  static std::vector<std::pair<std::string, torch::Tensor>> Weights(bool tied) {
    Qwen2ForCausalLM source(TinyConfig(tied), ModelOptions{});
    InitializeWeights(*source, 11, 0.5);
    std::vector<std::pair<std::string, torch::Tensor>> weights;
    for (const auto& item : source->named_parameters()) {
      weights.emplace_back(item.key(), item.value().detach());
    }
    return weights;
  }
  void WriteSingle(const std::vector<std::pair<std::string, torch::Tensor>>& weights) {
    WriteSafetensors(JoinPath(dir_, "model.safetensors"), weights);
  }
  std::string Path(const std::string& name) const { return JoinPath(dir_, name); }
  void ExpectLoadFails(bool tied, const std::vector<std::string>& fragments) {
    Qwen2ForCausalLM model(TinyConfig(tied), ModelOptions{});
    ExpectLoadError([&] { LoadSafetensorsDir(*model, dir_); }, fragments);
  }
};

TEST_F(LoaderTest, LoadsEveryParameter) {
  const auto weights = Weights(/*tied=*/false);
  WriteSingle(weights);
  Qwen2ForCausalLM model(TinyConfig(false), ModelOptions{});
  LoadSafetensorsDir(*model, dir_);
  auto params = model->named_parameters();
  for (const auto& [name, value] : weights) EXPECT_TRUE(torch::equal(params[name], value)) << name;
}

TEST_F(LoaderTest, RejectsMissingTensor) {
  auto weights = Weights(true);
  weights.erase(weights.begin() + 3);
  const std::string missing = Weights(true)[3].first;
  WriteSingle(weights);
  ExpectLoadFails(true, {dir_, "\"" + missing + "\"", "missing", "model.safetensors"});
}

TEST_F(LoaderTest, RejectsUnexpectedTensor) {
  auto weights = Weights(true);
  weights.emplace_back("model.layers.7.mlp.gate_proj.weight", torch::zeros({2, 2}));
  WriteSingle(weights);
  ExpectLoadFails(true,
                  {Path("model.safetensors"), "model.layers.7.mlp.gate_proj.weight", "unexpected"});
}

TEST_F(LoaderTest, TiedModelRejectsLmHead) {
  WriteSingle(Weights(false));
  ExpectLoadFails(true, {Path("model.safetensors"), "lm_head.weight", "tie_word_embeddings=true"});
}

TEST_F(LoaderTest, UntiedModelNeedsLmHead) {
  WriteSingle(Weights(true));
  ExpectLoadFails(false, {dir_, "lm_head.weight", "missing", "tie_word_embeddings=false"});
}

TEST_F(LoaderTest, RejectsShapeDisagreeingWithConfig) {
  auto weights = Weights(true);
  for (auto& [name, value] : weights) {
    if (name == "model.layers.1.self_attn.k_proj.weight") value = torch::zeros({64, 64});
  }
  WriteSingle(weights);
  ExpectLoadFails(true, {Path("model.safetensors"), "model.layers.1.self_attn.k_proj.weight",
                         "[64, 64]", "[32, 64]"});
}

TEST_F(LoaderTest, RejectsNonFloatDtype) {
  auto weights = Weights(true);
  for (auto& [name, value] : weights) {
    if (name == "model.norm.weight") value = torch::ones({64}, torch::kInt32);
  }
  WriteSingle(weights);
  ExpectLoadFails(true, {Path("model.safetensors"), "model.norm.weight", "dtype I32"});
}

TEST_F(LoaderTest, RejectsMalformedFileInsideSnapshot) {
  WriteRaw("model.safetensors", 1 << 20, "{}", "");
  ExpectLoadFails(true, {Path("model.safetensors"), "header length"});
}

TEST_F(LoaderTest, RejectsEmptyDirectory) {
  ExpectLoadFails(true, {dir_, "model.safetensors.index.json"});
}

TEST_F(LoaderTest, LoadsShardsAndConvertsDtype) {
  const auto weights = Weights(true);
  std::vector<std::pair<std::string, torch::Tensor>> first(weights.begin(), weights.begin() + 5);
  std::vector<std::pair<std::string, torch::Tensor>> second(weights.begin() + 5, weights.end());
  nlohmann::json map;
  for (const auto& w : first) map[w.first] = "a.safetensors";
  for (const auto& w : second) map[w.first] = "b.safetensors";
  std::ofstream(Path("model.safetensors.index.json")) << nlohmann::json{{"weight_map", map}};
  // Half-precision storage into a bf16 model: converted on copy.
  for (auto& w : second) w.second = w.second.to(torch::kFloat16);
  WriteSafetensors(Path("a.safetensors"), first);
  WriteSafetensors(Path("b.safetensors"), second);
  ModelOptions options;
  options.dtype = torch::kBFloat16;
  Qwen2ForCausalLM model(TinyConfig(true), options);
  LoadSafetensorsDir(*model, dir_);
  std::set<std::string> in_first;
  for (const auto& w : first) in_first.insert(w.first);
  auto params = model->named_parameters();
  for (const auto& [name, value] : weights) {
    const torch::Tensor stored = in_first.count(name) ? value : value.to(torch::kFloat16);
    EXPECT_TRUE(torch::equal(params[name], stored.to(torch::kBFloat16))) << name;
  }
}

TEST_F(LoaderTest, RejectsIndexNamingMissingShard) {
  const auto weights = Weights(true);
  nlohmann::json map;
  for (const auto& w : weights) map[w.first] = "model-00001-of-00002.safetensors";
  map["model.norm.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(Path("model.safetensors.index.json")) << nlohmann::json{{"weight_map", map}};
  WriteSafetensors(Path("model-00001-of-00002.safetensors"), weights);
  ExpectLoadFails(true, {Path("model.safetensors.index.json"), "model.norm.weight",
                         "model-00002-of-00002.safetensors", "does not exist"});
}

TEST_F(LoaderTest, RejectsShardDisagreeingWithIndex) {
  const auto weights = Weights(true);
  nlohmann::json map;
  for (const auto& w : weights) map[w.first] = "shard.safetensors";
  map.erase("model.norm.weight");
  std::ofstream(Path("model.safetensors.index.json")) << nlohmann::json{{"weight_map", map}};
  WriteSafetensors(Path("shard.safetensors"), weights);
  ExpectLoadFails(true, {Path("shard.safetensors"), "model.norm.weight", "not assigned"});
}

TEST_F(LoaderTest, RejectsBadIndex) {
  std::ofstream(Path("model.safetensors.index.json")) << "{\"weight_map\": ";
  ExpectLoadFails(true, {Path("model.safetensors.index.json"), "not valid JSON"});
  std::ofstream(Path("model.safetensors.index.json")) << R"({"weight_map": {"x": "../x"}})";
  ExpectLoadFails(true, {Path("model.safetensors.index.json"), "\"x\"", "bad shard name"});
}

}  // namespace
}  // namespace vramlab::worker
