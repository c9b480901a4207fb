#include "worker/model/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace vramlab::worker {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// `values` (contiguous fp32) drawn from N(0, std) block by block, each block from its own
// generator.
void DrawNormal(torch::Tensor& values, uint64_t seed, uint64_t position, double std) {
  torch::Tensor flat = values.view({-1});
  const int64_t numel = flat.numel();
  const int64_t blocks = (numel + kInitBlockElements - 1) / kInitBlockElements;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      at::Generator generator =
          at::detail::createCPUGenerator(InitBlockSeed(seed, position, static_cast<uint64_t>(b)));
      const int64_t start = b * kInitBlockElements;
      flat.narrow(0, start, std::min(kInitBlockElements, numel - start))
          .normal_(0.0, std, generator);
    }
  });
}

}  // namespace

uint64_t InitBlockSeed(uint64_t seed, uint64_t position, uint64_t block) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ position) ^ block);
}

void InitializeWeights(Qwen2ForCausalLMImpl& model, uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  uint64_t position = 0;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor param = item.value();
    if (EndsWith(name, ".bias")) {
      param.zero_();
    } else if (param.dim() == 1) {  // the only 1-D weights are RMSNorm scales
      param.fill_(1.0);
    } else {
      torch::Tensor values = torch::empty(param.sizes(), torch::kFloat32);
      DrawNormal(values, seed, position, std);
      param.copy_(values);
    }
    ++position;
  }
}

}  // namespace vramlab::worker
