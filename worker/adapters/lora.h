// LoRA on a Qwen2 model, as HF PEFT's get_peft_model(model, LoraConfig(...)) leaves it: every
// base parameter frozen (requires_grad false, so autograd never allocates a gradient for it) and
// a LoraLinear on each targeted projection of every decoder layer. Embeddings, norms and lm_head
// are never wrapped.
//
// Init (PEFT's default, init_lora_weights=True): A ~ Kaiming-uniform(a=sqrt(5)), i.e.
// U(-1/sqrt(in), 1/sqrt(in)); B = 0, so the first forward equals the base model's. A is drawn
// in fp32 on the CPU from one generator seeded with `seed`, layer by layer and target by target
// (q, k, v, o, gate, up, down), then copied to the adapter's device and dtype.
#ifndef VRAMLAB_WORKER_ADAPTERS_LORA_H_
#define VRAMLAB_WORKER_ADAPTERS_LORA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

struct LoraOptions {
  int64_t rank = 8;
  double alpha = 8;
  double dropout = 0;
  // PEFT module names ("q_proj", ..., "down_proj"); empty means all seven.
  std::vector<std::string> targets;
  // The adapter weights' dtype (PEFT keeps them in fp32 over a bf16/fp16 base by default).
  torch::Dtype dtype = torch::kFloat32;
  uint64_t seed = 0;
};

struct AdapterSummary {
  int64_t trainable_parameters = 0;  // elements of every A and B
  int64_t adapter_bytes = 0;         // their storage bytes
  int64_t frozen_parameters = 0;     // elements of the base model
};

// The seven projections PEFT may target in a Qwen2 decoder layer, in canonical order.
const std::vector<std::string>& AllLoraTargets();

// The projection called `name` ("q_proj", ...) of `layer`; throws std::invalid_argument for
// another name.
Linear& TargetLinear(Qwen2DecoderLayerImpl& layer, const std::string& name);

// Freezes `model` and attaches LoRA adapters. Throws std::invalid_argument for a bad rank (<= 0
// or above min(in, out) of a target), alpha <= 0, dropout outside [0, 1) or an unknown target.
AdapterSummary AttachLora(Qwen2ForCausalLMImpl& model, const LoraOptions& options);

// The parameters that require a gradient, by name: what an optimizer must hold (only the
// adapters once AttachLora ran; every parameter of a fully fine-tuned model).
std::vector<std::pair<std::string, torch::Tensor>> TrainableParameters(torch::nn::Module& model);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_LORA_H_
