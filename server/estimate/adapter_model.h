// Adapter training (LoRA, QLoRA: worker/adapters/) in the estimate: which base tensors are frozen
// or stored in NF4, the trainable adapter tensors, and what the adapters add to a decoder
// layer's activations.
//
// Parameters follow the worker exactly (common/spec/adapter_sizes.h gives NF4's bytes). The
// activation terms follow the worker's code (lora_linear.cc, nf4_linear.cc) tensor by tensor but,
// unlike the full fine-tuning model, have not been measured against GPU runs yet.
#ifndef VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_

#include <cstdint>
#include <vector>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

struct AdapterTensors {
  // Elements of every lora_A and lora_B, layer by layer (q, k, v, o, gate, up, down; A then B).
  std::vector<int64_t> trainable;
  // Elements of one layer's adapters.
  std::vector<int64_t> layer_trainable;
  // For each entry of ParameterTensorElements(): whether it is a wrapped projection's weight.
  std::vector<bool> wrapped;
};

AdapterTensors ListAdapterTensors(const RunSettings& run);

// Bytes one decoder layer's adapters add to LayerActivations (all in allocated bytes).
struct AdapterActivations {
  int64_t kept = 0;               // saved for backward (A's output; with dropout its input and mask)
  int64_t forward_transient = 0;  // above the plain layer's peak while a wrapped projection runs
  int64_t backward_transient = 0;
};

AdapterActivations EstimateAdapterActivations(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_
