// QLoRA on a Qwen2 model, as PEFT over bitsandbytes' load_in_4bit (nf4, double quantisation)
// leaves it: the base weight of every targeted projection is stored in NF4 (nf4.h) and
// dequantised to the compute dtype on the fly, in forward and again in backward (nothing
// dequantised outlives its matmul); embeddings, norms, biases and lm_head stay in the model's
// dtype; LoRA adapters (lora.h) on the same projections.
//
// Forward of a wrapped projection, as peft.tuners.lora.bnb.Linear4bit:
//   y = x W^T + b;  y = y + (B(A(dropout(x))) * alpha / rank).to(y.dtype)
//
// Placement: the model is built, loaded and given its adapters on the host (so the full-precision
// base weights never exist on the device); AttachQlora then quantises one weight at a time on
// `device` and moves every other parameter there. On a CPU run the host is the device, so the
// full-precision weights are counted there during LOAD.
#ifndef VRAMLAB_WORKER_ADAPTERS_QLORA_H_
#define VRAMLAB_WORKER_ADAPTERS_QLORA_H_

#include <string>

#include <torch/torch.h>

#include "worker/adapters/lora.h"
#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

struct QloraSummary {
  AdapterSummary adapters;
  int64_t nf4_code_bytes = 0;  // packed 4-bit codes of every quantised weight
  // Absmax codes and scales of every quantised weight, and the shared lookup tables (Nf4Tables).
  int64_t quantization_constant_bytes = 0;
  int64_t nf4_table_bytes = 0;       // the shared lookup tables' share of the above
  int64_t quantized_parameters = 0;  // elements stored in NF4
};

// The buffers under which a quantised projection exposes its NF4 storage (Nf4Tensor's codes,
// absmax_codes and absmax_scales; the same tensors, so freeing or replacing a buffer's storage is
// seen by the projection's matmul).
inline constexpr char kNf4CodesBuffer[] = "weight_nf4_codes";
inline constexpr char kNf4AbsmaxCodesBuffer[] = "weight_nf4_absmax_codes";
inline constexpr char kNf4AbsmaxScalesBuffer[] = "weight_nf4_absmax_scales";

// Whether a (possibly dotted) buffer name is one of a projection's NF4 storage buffers, and
// whether it is one of its quantisation constants (absmax codes or scales).
bool IsNf4StorageBuffer(const std::string& name);
bool IsNf4ConstantBuffer(const std::string& name);

// Freezes `model` (on the host), attaches LoRA, quantises the targeted base weights to NF4 on
// `device` and moves the rest there. Throws std::invalid_argument as AttachLora does.
QloraSummary AttachQlora(Qwen2ForCausalLMImpl& model, const LoraOptions& options,
                         const torch::Device& device);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_QLORA_H_
