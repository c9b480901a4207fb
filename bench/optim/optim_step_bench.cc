// The optimizer step alone, per mode, on a preset's parameter shapes (bf16), with random
// gradients: what Step() costs on the device, from the call to a device synchronize, median of
// repeats after one warm-up step (which allocates the state). No forward or backward runs, so the
// offloaded mode here is the synchronous host step (the overlap needs a backward to hide in;
// bench/gpu/step_phases.py measures that in real runs).
//   vramlab-optim-step-bench [PRESET] [REPEATS] [cuda|cpu]     (default qwen2.5-1.5b, 10, cuda)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "common/spec/model_presets.h"
#include "worker/optim/optimizer.h"
#include "worker/optim/rule_optimizer.h"
#include "worker/optim/rules.h"

namespace {

using vramlab::worker::MakeOptimizer;
using vramlab::worker::Optimizer;
using vramlab::worker::OptimizerKind;
using vramlab::worker::OptimizerOptions;
using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// The trainable tensors of a Qwen2 model of `preset`'s shapes (HF's list: per layer q/k/v with
// biases, o, gate, up, down, two norms; embedding, final norm, lm_head unless tied).
std::vector<std::vector<int64_t>> Shapes(const vramlab::spec_rules::ModelPreset& p) {
  const int64_t h = p.hidden_size, kv = h / p.num_attention_heads * p.num_key_value_heads;
  std::vector<std::vector<int64_t>> shapes = {{p.vocab_size, h}, {h}};
  if (!p.tie_word_embeddings) shapes.push_back({p.vocab_size, h});
  for (int64_t layer = 0; layer < p.num_hidden_layers; ++layer) {
    for (const std::vector<int64_t>& s : std::vector<std::vector<int64_t>>{{h, h},
                                                                           {h},
                                                                           {kv, h},
                                                                           {kv},
                                                                           {kv, h},
                                                                           {kv},
                                                                           {h, h},
                                                                           {p.intermediate_size, h},
                                                                           {p.intermediate_size, h},
                                                                           {h, p.intermediate_size},
                                                                           {h},
                                                                           {h}}) {
      shapes.push_back(s);
    }
  }
  return shapes;
}

NamedParams MakeParams(const std::vector<std::vector<int64_t>>& shapes,
                       const torch::Device& device) {
  NamedParams params;
  torch::manual_seed(0);
  for (size_t i = 0; i < shapes.size(); ++i) {
    torch::Tensor p = (torch::randn(shapes[i], torch::TensorOptions().device(device)) * 0.02)
                          .to(torch::kBFloat16)
                          .set_requires_grad(true);
    p.mutable_grad() = (torch::randn(shapes[i], torch::TensorOptions().device(device)) * 1e-3)
                           .to(torch::kBFloat16);
    params.emplace_back("p" + std::to_string(i), p);
  }
  return params;
}

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

double MedianStepSeconds(Optimizer& optimizer, const torch::Device& device, int repeats) {
  optimizer.Step();  // allocates the state
  Synchronize(device);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    optimizer.Step();
    Synchronize(device);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset_name = argc > 1 ? argv[1] : "qwen2.5-1.5b";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  const bool cuda = (argc > 3 ? std::string(argv[3]) : "cuda") == "cuda";
  const vramlab::spec_rules::ModelPreset* preset =
      vramlab::spec_rules::FindModelPreset(preset_name);
  if (preset == nullptr || (cuda && !torch::cuda::is_available())) {
    std::fprintf(stderr,
                 "usage: vramlab-optim-step-bench [PRESET] [REPEATS] [cuda|cpu]; presets: %s%s\n",
                 vramlab::spec_rules::ModelPresetNames().c_str(),
                 cuda ? " (and CUDA must be available)" : "");
    return 2;
  }
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const std::vector<std::vector<int64_t>> shapes = Shapes(*preset);
  int64_t elements = 0;
  for (const auto& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    elements += n;
  }
  std::printf("%s: %zu tensors, %lld elements, bf16, on %s, %d host threads, median of %d\n",
              preset_name.c_str(), shapes.size(), static_cast<long long>(elements),
              device.str().c_str(), at::get_num_threads(), repeats);
  std::printf("| mode | implementation | step (s) | vs adamw |\n|---|---|---|---|\n");
  struct Mode {
    const char* name;
    OptimizerKind kind;
    bool offload, aten_8bit;
  };
  double adamw = 0;
  for (const Mode& mode :
       {Mode{"adamw", OptimizerKind::kAdamW, false, false},
        Mode{"adamw-8bit", OptimizerKind::kAdamW8bit, false, false},
        Mode{"adamw-8bit (ATen ops)", OptimizerKind::kAdamW8bit, false, true},
        Mode{"adamw offload (synchronous)", OptimizerKind::kAdamW, true, false}}) {
    NamedParams params = MakeParams(shapes, device);
    OptimizerOptions options;
    options.kind = mode.kind;
    options.offload_to_cpu = mode.offload;
    std::unique_ptr<Optimizer> optimizer;
    if (mode.aten_8bit) {
      std::vector<torch::Tensor> tensors;
      for (const auto& [name, p] : params) tensors.push_back(p);
      optimizer = std::make_unique<vramlab::worker::optim_internal::RuleOptimizer>(
          tensors,
          vramlab::worker::optim_internal::MakeAdamW8bitRule(options, tensors.size(), false),
          options);
    } else {
      optimizer = MakeOptimizer(params, options);
    }
    const double seconds = MedianStepSeconds(*optimizer, device, repeats);
    if (mode.kind == OptimizerKind::kAdamW && !mode.offload) adamw = seconds;
    std::printf("| %s | %s | %.4f | %.2fx |\n", mode.name, optimizer->Describe().c_str(), seconds,
                adamw > 0 ? seconds / adamw : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
