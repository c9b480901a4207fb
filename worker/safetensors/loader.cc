#include "worker/safetensors/loader.h"

#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/safetensors/safetensors_file.h"
#include "worker/util/file_paths.h"
#include "worker/util/host_files.h"

namespace vramlab::worker {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string ShapeText(at::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// shard file name -> tensor names the index assigns to it.
std::map<std::string, std::set<std::string>> ReadIndex(const std::string& index_path) {
  // An index maps a few hundred names; the bound keeps a wrong file from being read whole.
  constexpr size_t kMaxIndexBytes = size_t{64} << 20;
  std::string text;
  try {
    text = ReadHostFile(index_path, kMaxIndexBytes);
  } catch (const HostFileError& e) {
    throw LoadError(e.what());
  }
  nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) throw LoadError(index_path + ": not valid JSON");
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw LoadError(index_path + ": no \"weight_map\" object");
  }
  std::map<std::string, std::set<std::string>> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      throw LoadError(index_path + ": tensor \"" + tensor + "\": shard name is not a string");
    }
    const std::string file = shard.get<std::string>();
    // Shards live next to the index; a path would let the index reach outside the snapshot.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      throw LoadError(index_path + ": tensor \"" + tensor + "\": bad shard name \"" + file + "\"");
    }
    if (!PathExists(JoinPath(DirName(index_path), file))) {
      throw LoadError(index_path + ": tensor \"" + tensor + "\" is in shard \"" + file +
                      "\", which does not exist");
    }
    shards[file].insert(tensor);
  }
  if (shards.empty()) throw LoadError(index_path + ": weight_map is empty");
  return shards;
}

class ParameterLoader {
 public:
  explicit ParameterLoader(Qwen2ForCausalLMImpl& model) : model_(model) {
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      params_.emplace(item.key(), item.value());
    }
  }

  // Copies every tensor of `path` into its parameter. `expected`, when given, is the set of
  // names the index assigns to this shard; the file must hold exactly those.
  void LoadFile(const std::string& path, const std::set<std::string>* expected) {
    std::unique_ptr<SafetensorsFile> file = SafetensorsFile::Open(path);
    for (const auto& [name, entry] : file->entries()) {
      if (expected != nullptr && expected->count(name) == 0) {
        throw LoadError(path + ": tensor \"" + name + "\" is not assigned to this shard by " +
                        kIndexFile);
      }
      torch::Tensor param = FindParameter(path, name);
      CheckCompatible(path, name, entry, param);
      {
        torch::NoGradGuard no_grad;
        param.copy_(file->View(name));
      }
      file->Release(name);
      origin_[name] = path;
    }
    if (expected != nullptr) {
      for (const std::string& name : *expected) {
        if (file->entries().count(name) == 0) {
          throw LoadError(path + ": tensor \"" + name + "\" is missing although " + kIndexFile +
                          " assigns it to this shard");
        }
      }
    }
  }

  void CheckAllLoaded(const std::string& dir, const std::vector<std::string>& files) const {
    for (const auto& [name, param] : params_) {
      if (origin_.count(name) != 0) continue;
      std::string list;
      for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
      throw LoadError(dir + ": tensor \"" + name + "\" is missing (read " + list + ")" +
                      (name == "lm_head.weight"
                           ? "; the config unties the embeddings (tie_word_embeddings=false)"
                           : ""));
    }
  }

 private:
  torch::Tensor FindParameter(const std::string& path, const std::string& name) {
    auto it = params_.find(name);
    if (it == params_.end()) {
      if (name == "lm_head.weight" && model_.config().tie_word_embeddings) {
        throw LoadError(path +
                        ": tensor \"lm_head.weight\" is unexpected: the config ties the "
                        "embeddings (tie_word_embeddings=true)");
      }
      throw LoadError(path + ": tensor \"" + name + "\" is unexpected: no such parameter");
    }
    auto seen = origin_.find(name);
    if (seen != origin_.end()) {
      throw LoadError(path + ": tensor \"" + name + "\" was already loaded from " + seen->second);
    }
    return it->second;
  }

  static void CheckCompatible(const std::string& path, const std::string& name,
                              const SafetensorsEntry& entry, const torch::Tensor& param) {
    if (entry.scalar_type != torch::kFloat32 && entry.scalar_type != torch::kBFloat16 &&
        entry.scalar_type != torch::kFloat16) {
      throw LoadError(path + ": tensor \"" + name + "\" has dtype " + entry.dtype +
                      "; weights must be F32, BF16 or F16");
    }
    if (!param.sizes().equals(entry.shape)) {
      throw LoadError(path + ": tensor \"" + name + "\" has shape " + ShapeText(entry.shape) +
                      " but the config needs " + ShapeText(param.sizes()));
    }
  }

  Qwen2ForCausalLMImpl& model_;
  std::map<std::string, torch::Tensor> params_;
  std::map<std::string, std::string> origin_;  // loaded tensor -> file it came from
};

}  // namespace

void LoadSafetensorsDir(Qwen2ForCausalLMImpl& model, const std::string& dir) {
  ParameterLoader loader(model);
  std::vector<std::string> files;
  if (PathExists(JoinPath(dir, kIndexFile))) {
    for (const auto& [shard, names] : ReadIndex(JoinPath(dir, kIndexFile))) {
      files.push_back(JoinPath(dir, shard));
      loader.LoadFile(files.back(), &names);
    }
  } else if (PathExists(JoinPath(dir, kSingleFile))) {
    files.push_back(JoinPath(dir, kSingleFile));
    loader.LoadFile(files.back(), nullptr);
  } else {
    throw LoadError(dir + ": neither " + kSingleFile + " nor " + kIndexFile + " exists");
  }
  loader.CheckAllLoaded(dir, files);
}

}  // namespace vramlab::worker
