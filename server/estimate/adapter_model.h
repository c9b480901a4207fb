// Adapter training (LoRA, QLoRA: worker/adapters/) in the estimate: which base tensors are frozen
// or stored in NF4, the trainable adapter tensors, and what each wrapped projection adds to a
// decoder layer's activations.
//
// Parameters follow the worker exactly (common/spec/adapter_sizes.h gives NF4's bytes). The
// activation terms follow the worker's code (lora_linear.cc, nf4_linear.cc, nf4.cc) tensor by
// tensor: what each autograd node saves and what its forward and backward allocate.
#ifndef VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_
#define VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_

#include <array>
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

// One wrapped projection of a micro-batch, in allocated bytes. All zero when it is not wrapped
// (the full model's count of a plain linear applies).
struct ProjectionActivations {
  // Saved for backward beyond the projection's input: A's output (with dropout, the dropped input
  // and its mask).
  int64_t kept = 0;
  // Most live during its forward above what was live before the call, its output included.
  int64_t forward = 0;
  // Most live during its backward above what was live before it (the incoming gradient of its
  // output is live before), the gradient of its input included.
  int64_t backward = 0;
};

enum AdapterProjection { kQ, kK, kV, kO, kGate, kUp, kDown, kNumProjections };

// Each projection's module path inside a decoder layer (its parameters' name prefix).
constexpr const char* kProjectionPaths[kNumProjections] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

// A projection's input and output features in `run`'s model, whether its adapter wraps it and
// whether it has a bias (the model's qkv_bias, o_bias, mlp_bias).
struct ProjectionFeatures {
  int64_t in = 0, out = 0;
  bool wrapped = false;
  bool bias = false;
};
ProjectionFeatures FeaturesOf(const RunSettings& run, AdapterProjection projection);

struct AdapterActivations {
  int64_t kept = 0;  // the sum over the layer's projections
  std::array<ProjectionActivations, kNumProjections> projection;
};

AdapterActivations EstimateAdapterActivations(const RunSettings& run);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ADAPTER_MODEL_H_
