#include "worker/parallel/model_units.h"

namespace vramlab::worker {

std::vector<std::vector<size_t>> ModelUnits(Qwen2ModelImpl& model,
                                            const std::unordered_map<const void*, size_t>& index_of,
                                            size_t tracked) {
  std::vector<std::vector<size_t>> units;
  std::vector<bool> in_layer(tracked, false);
  for (const Qwen2DecoderLayer& layer : model.decoder_layers()) {
    std::vector<size_t> unit;
    std::vector<torch::Tensor> tensors = layer->parameters();
    for (const torch::Tensor& b : layer->buffers()) tensors.push_back(b);
    for (const torch::Tensor& t : tensors) {
      const auto found = index_of.find(t.unsafeGetTensorImpl());
      if (found == index_of.end() || in_layer[found->second]) continue;  // not tracked, or seen
      in_layer[found->second] = true;
      unit.push_back(found->second);
    }
    units.push_back(std::move(unit));
  }
  std::vector<size_t> root;
  for (size_t i = 0; i < tracked; ++i) {
    if (!in_layer[i]) root.push_back(i);
  }
  units.push_back(std::move(root));
  return units;
}

}  // namespace vramlab::worker
