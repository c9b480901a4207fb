#include "worker/adapters/adapter_weights.h"

#include <map>
#include <memory>

#include "worker/safetensors/safetensors_file.h"

namespace vramlab::worker {

void LoadAdapterWeights(torch::nn::Module& model, const std::string& path) {
  std::map<std::string, torch::Tensor> trainable;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) trainable[item.key()] = item.value();
  }
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::Open(path);
  for (const auto& [name, entry] : file->entries()) {
    auto target = trainable.find(name);
    if (target == trainable.end()) {
      throw LoadError(path + ": tensor \"" + name + "\" is not a trainable parameter of the model");
    }
    torch::Tensor values = file->View(name);
    if (values.sizes() != target->second.sizes()) {
      throw LoadError(path + ": tensor \"" + name + "\" has another shape than the parameter");
    }
    torch::NoGradGuard no_grad;
    target->second.copy_(values);
    trainable.erase(target);
  }
  if (!trainable.empty()) {
    throw LoadError(path + ": tensor \"" + trainable.begin()->first + "\" is missing");
  }
}

}  // namespace vramlab::worker
