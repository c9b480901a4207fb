#include "server/estimate/adapter_model.h"

#include <algorithm>

#include "common/spec/adapter_sizes.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {
namespace {

struct Projection {
  int target;  // proto AdapterTarget value
  int64_t in, out;
  size_t layer_index;  // position of its weight among a layer's parameter tensors
};

std::vector<Projection> Projections(const ModelShape& m) {
  const int64_t h = m.hidden_size, q = m.q_dim(), kv = m.kv_dim(), i = m.intermediate_size;
  auto index = [&](const char* name) { return LayerTensorIndex(m, name); };
  return {
      {1, h, q, index("self_attn.q_proj.weight")},  {2, h, kv, index("self_attn.k_proj.weight")},
      {3, h, kv, index("self_attn.v_proj.weight")}, {4, q, h, index("self_attn.o_proj.weight")},
      {5, h, i, index("mlp.gate_proj.weight")},     {6, h, i, index("mlp.up_proj.weight")},
      {7, i, h, index("mlp.down_proj.weight")}};
}

bool Wraps(const RunSettings& run, int target) {
  const std::vector<int>& t = run.adapter.targets;
  return std::find(t.begin(), t.end(), target) != t.end();
}

// The model's flags: qkv_bias, o_bias, mlp_bias.
bool HasBias(const ModelShape& m, AdapterProjection projection) {
  return projection <= kV ? m.qkv_bias : projection == kO ? m.o_bias : m.mlp_bias;
}

}  // namespace

ProjectionFeatures FeaturesOf(const RunSettings& run, AdapterProjection projection) {
  const Projection p = Projections(run.model)[static_cast<size_t>(projection)];
  return {p.in, p.out, run.adapter.enabled() && Wraps(run, p.target),
          HasBias(run.model, projection)};
}

AdapterTensors ListAdapterTensors(const RunSettings& run) {
  AdapterTensors tensors;
  const ModelShape& m = run.model;
  tensors.wrapped.assign(ParameterTensorElements(m).size(), false);
  if (!run.adapter.enabled()) return tensors;
  const int64_t r = run.adapter.rank;
  for (const Projection& p : Projections(m)) {
    if (!Wraps(run, p.target)) continue;
    tensors.layer_trainable.push_back(r * p.in);   // A
    tensors.layer_trainable.push_back(p.out * r);  // B
  }
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    tensors.trainable.insert(tensors.trainable.end(), tensors.layer_trainable.begin(),
                             tensors.layer_trainable.end());
    for (const Projection& p : Projections(m)) {
      if (Wraps(run, p.target)) tensors.wrapped[LayerTensorBegin(m, layer) + p.layer_index] = true;
    }
  }
  return tensors;
}

AdapterActivations EstimateAdapterActivations(const RunSettings& run) {
  AdapterActivations a;
  if (!run.adapter.enabled()) return a;
  const int64_t tokens = run.tokens();
  const int64_t ab = run.adapter.dtype_bytes, e = run.dtype_bytes, r = run.adapter.rank;
  auto alloc = [&](int64_t nbytes) { return AllocatedBytes(run.device, nbytes); };
  // A cast to the adapter dtype (or back) is a new tensor only when the dtypes differ.
  const bool cast = ab != e;
  for (const Projection& p : Projections(run.model)) {
    if (!Wraps(run, p.target)) continue;
    ProjectionActivations& pa = a.projection[static_cast<size_t>(p.target - 1)];
    const int64_t out_e = alloc(tokens * p.out * e), out_a = alloc(tokens * p.out * ab);
    const int64_t in_e = alloc(tokens * p.in * e), in_a = alloc(tokens * p.in * ab);
    const int64_t in_cast = cast ? in_a : 0, out_cast = cast ? out_a : 0;
    const bool bias = HasBias(run.model, static_cast<AdapterProjection>(p.target - 1));
    // A's output [tokens, r] in the adapter dtype, saved by the update's node.
    pa.kept = alloc(tokens * r * ab);
    if (run.adapter.dropout > 0) {
      // The plain autograd path (LoraLinear::Update): x cast, the dropped copy and its mask are
      // saved; the update's matmul output and its scaled copy, then the sum with the base output
      // in the wider dtype and its cast back. Backward: the widened output gradient, the scaled
      // gradient, the gradients of the dropped input and of the cast, and the base's input
      // gradient.
      const int64_t mask = alloc(tokens * p.in);
      pa.kept += in_a + mask;
      pa.forward =
          out_e + std::max({in_cast + in_a + mask, 2 * out_a, out_a + out_a + (cast ? out_e : 0)});
      pa.backward = out_cast + out_a + (cast ? out_e : 0) + 2 * in_a + in_e;
    } else if (!run.adapter.qlora) {
      // LoraLinearFunction (one node; saves x, the frozen weight, A, B and A's output).
      // Forward: the base output; x cast for A and A's output (the cast freed after it); the base
      // output widened and addmm's sum; the sum cast back (the output).
      pa.forward =
          out_e + pa.kept + std::max({in_cast, out_cast + out_a, out_a + (cast ? out_e : 0)});
      // Backward: the gradient widened and grad_h = grad·B (held until return); x cast again for
      // A's gradient; then grad·W, grad_h·A in the adapter dtype, its cast and their sum (the
      // input's gradient) in one expression.
      pa.backward = out_cast + pa.kept + std::max(in_cast, in_e + in_a + (cast ? in_e : 0) + in_e);
    } else {
      // QLoRA (Nf4LoraLinear::Forward): Nf4Matmul (saves nothing), the bias add, then
      // LoraUpdateFunction (saves x, A, B and A's output) and the sum in the base dtype.
      // DequantizeNf4 (nf4.cc): the codes widened to int32 (4 bytes per code byte, two elements
      // per byte) and the looked-up weight in the compute dtype; the int32 indices are freed
      // before the matmul, the weight right after it.
      const int64_t n = p.in * p.out;
      const int64_t weight = alloc(n * e);
      const int64_t dequantize = alloc((n + 1) / 2 * 4) + weight;
      const int64_t base_matmul = std::max(dequantize, weight + out_e);
      const int64_t bias_add = bias ? 2 * out_e : out_e;
      // The update: x cast for A (a temporary of the call), B's output and its scaled copy; then
      // the update (adapter dtype) cast to the base dtype and the sum, with the base output.
      const int64_t update = out_e + std::max(in_cast, 2 * out_a);
      const int64_t sum = cast ? out_e + out_a + out_e + out_e : 3 * out_e;
      // A's output lives from the update on.
      pa.forward = std::max({base_matmul, bias_add, update + pa.kept, sum + pa.kept});
      // Backward, in the engine's order (the later node first): the widened gradient
      // (ToCopyBackward), then LoraUpdateFunction: its scaled copy and grad_h = grad·B, x cast
      // again for A's gradient, then grad_h·A in the adapter dtype and its cast (the update's input
      // gradient), with the widened gradient still held by the call. Then Nf4MatmulFunction
      // dequantises again (the absmax decoded through two fp32 temporaries at a time) and forms
      // grad·W while the update's input gradient waits; the engine adds grad·W into it in place.
      const int64_t update_bwd =
          out_cast + out_a + pa.kept + std::max(in_cast, in_a + (cast ? in_e : 0));
      const int64_t absmax = alloc(spec_rules::CeilDiv(n, spec_rules::kNf4BlockSize) * 4);
      const int64_t base_bwd = in_e + std::max({dequantize, weight + 2 * absmax, weight + in_e});
      pa.backward = std::max(update_bwd, base_bwd);
    }
    a.kept += pa.kept;
  }
  return a;
}

}  // namespace vramlab::server::estimate
