// Adapter weights from a safetensors file (PEFT's adapter_model.safetensors names without the
// "base_model.model." prefix, e.g. "model.layers.0.self_attn.q_proj.lora_A.weight"): to start
// from known adapters (a saved run, or HF PEFT's init in the reference tests) instead of the
// seeded init.
#ifndef VRAMLAB_WORKER_ADAPTERS_ADAPTER_WEIGHTS_H_
#define VRAMLAB_WORKER_ADAPTERS_ADAPTER_WEIGHTS_H_

#include <string>

#include <torch/torch.h>

namespace vramlab::worker {

// Copies every tensor of `path` into the trainable parameter of the same name (converting the
// dtype and device). Throws LoadError when the file names a tensor that is not a trainable
// parameter, has another shape, or lacks one of the trainable parameters.
void LoadAdapterWeights(torch::nn::Module& model, const std::string& path);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_ADAPTER_WEIGHTS_H_
