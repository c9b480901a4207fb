#include "worker/adapters/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "worker/adapters/lora_linear.h"

namespace vramlab::worker {
namespace {

void CheckOptions(const LoraOptions& options) {
  if (options.rank <= 0)
    throw std::invalid_argument("LoRA rank must be > 0, got " + std::to_string(options.rank));
  if (!(options.alpha > 0)) throw std::invalid_argument("LoRA alpha must be > 0");
  if (!(options.dropout >= 0 && options.dropout < 1)) {
    throw std::invalid_argument("LoRA dropout must be in [0, 1)");
  }
  if (!torch::isFloatingType(options.dtype))
    throw std::invalid_argument("LoRA dtype must be floating-point");
  const std::vector<std::string>& all = AllLoraTargets();
  for (const std::string& target : options.targets) {
    if (std::find(all.begin(), all.end(), target) == all.end()) {
      throw std::invalid_argument("unknown LoRA target \"" + target + "\"");
    }
  }
}

}  // namespace

const std::vector<std::string>& AllLoraTargets() {
  static const std::vector<std::string> targets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};
  return targets;
}

Linear& TargetLinear(Qwen2DecoderLayerImpl& layer, const std::string& name) {
  Qwen2AttentionImpl& attention = *layer.self_attn;
  Qwen2MLPImpl& mlp = *layer.mlp;
  if (name == "q_proj") return attention.q_proj;
  if (name == "k_proj") return attention.k_proj;
  if (name == "v_proj") return attention.v_proj;
  if (name == "o_proj") return attention.o_proj;
  if (name == "gate_proj") return mlp.gate_proj;
  if (name == "up_proj") return mlp.up_proj;
  if (name == "down_proj") return mlp.down_proj;
  throw std::invalid_argument("unknown LoRA target \"" + name + "\"");
}

AdapterSummary AttachLora(Qwen2ForCausalLMImpl& model, const LoraOptions& options) {
  CheckOptions(options);
  AdapterSummary summary;
  for (torch::Tensor& p : model.parameters()) {
    p.requires_grad_(false);
    summary.frozen_parameters += p.numel();
  }
  // Canonical order, whatever order the options list them in.
  std::vector<std::string> targets;
  for (const std::string& t : AllLoraTargets()) {
    if (options.targets.empty() ||
        std::find(options.targets.begin(), options.targets.end(), t) != options.targets.end()) {
      targets.push_back(t);
    }
  }
  const double scaling = options.alpha / static_cast<double>(options.rank);
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  for (Qwen2DecoderLayer layer : model.model->decoder_layers()) {
    for (const std::string& name : targets) {
      Linear& base = TargetLinear(*layer, name);
      const int64_t out = base->weight.size(0), in = base->weight.size(1);
      if (options.rank > std::min(in, out)) {
        throw std::invalid_argument("LoRA rank " + std::to_string(options.rank) +
                                    " exceeds min(in, out) = " + std::to_string(std::min(in, out)) +
                                    " of " + name);
      }
      const auto adapter_options =
          torch::TensorOptions().dtype(options.dtype).device(base->weight.device());
      Linear a(in, options.rank, /*bias=*/false, adapter_options);
      Linear b(options.rank, out, /*bias=*/false, adapter_options);
      {
        torch::NoGradGuard no_grad;
        const double bound =
            1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform_(a=sqrt(5))
        a->weight.copy_(
            torch::empty({options.rank, in}, torch::kFloat32).uniform_(-bound, bound, generator));
        b->weight.zero_();
      }
      base->register_module("lora_A", a);
      base->register_module("lora_B", b);
      base->adapter = std::make_shared<LoraLinear>(a, b, scaling, options.dropout);
      summary.trainable_parameters += a->weight.numel() + b->weight.numel();
      summary.adapter_bytes += a->weight.nbytes() + b->weight.nbytes();
    }
  }
  model.model->set_preserve_rng_state(options.dropout > 0);
  return summary;
}

std::vector<std::pair<std::string, torch::Tensor>> TrainableParameters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) named.emplace_back(item.key(), item.value());
  }
  return named;
}

}  // namespace vramlab::worker
