// Helpers shared by the model tests: building the testdata checkpoints and reading what HF
// computed for them (testdata/README.md).
#ifndef VRAMLAB_WORKER_MODEL_MODEL_TEST_UTIL_H_
#define VRAMLAB_WORKER_MODEL_MODEL_TEST_UTIL_H_

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_model.h"
#include "worker/safetensors/loader.h"

namespace vramlab::worker::testing {

inline std::string TestdataDir(const std::string& name) {
  return std::string(VRAMLAB_TESTDATA_DIR) + "/" + name;
}

inline Qwen2ForCausalLM LoadCheckpoint(const std::string& name, ModelOptions options = {}) {
  const std::string dir = TestdataDir(name);
  Qwen2ForCausalLM model(ConfigFromFile(dir + "/config.json"), options);
  LoadSafetensorsDir(*model, dir);
  return model;
}

inline nlohmann::json ReadExpected(const std::string& name) {
  std::ifstream in(TestdataDir(name) + "/expected.json");
  return nlohmann::json::parse(in);
}

inline torch::Tensor InputIds(const nlohmann::json& expected) {
  std::vector<int64_t> flat;
  for (const auto& row : expected["input_ids"]) {
    for (const auto& id : row) flat.push_back(id.get<int64_t>());
  }
  const int64_t rows = static_cast<int64_t>(expected["input_ids"].size());
  return torch::tensor(flat, torch::kInt64).view({rows, -1});
}

// Parameter name -> gradient (a clone), after the caller ran backward.
inline std::map<std::string, torch::Tensor> Gradients(Qwen2ForCausalLM& model) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : model->named_parameters()) {
    grads[item.key()] = item.value().grad().clone();
  }
  return grads;
}

inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace vramlab::worker::testing

#endif  // VRAMLAB_WORKER_MODEL_MODEL_TEST_UTIL_H_
