#include "worker/model/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace vramlab::worker {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void InitializeWeights(Qwen2ForCausalLMImpl& model, uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor param = item.value();
    if (EndsWith(name, ".bias")) {
      param.zero_();
    } else if (param.dim() == 1) {  // the only 1-D weights are RMSNorm scales
      param.fill_(1.0);
    } else {
      torch::Tensor values = torch::empty(param.sizes(), torch::kFloat32);
      values.normal_(0.0, std, generator);
      param.copy_(values);
    }
  }
}

}  // namespace vramlab::worker
