#include "server/estimate/adapter_model.h"

#include <algorithm>

#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {
namespace {

struct Projection {
  int target;  // proto AdapterTarget value
  int64_t in, out;
  int64_t layer_index;  // position among a layer's 12 parameter tensors
};

std::vector<Projection> Projections(const ModelShape& m) {
  const int64_t h = m.hidden_size, kv = m.kv_dim(), i = m.intermediate_size;
  return {{1, h, h, 0}, {2, h, kv, 2}, {3, h, kv, 4}, {4, h, h, 6},
          {5, h, i, 7}, {6, h, i, 8},  {7, i, h, 9}};
}

bool Wraps(const RunSettings& run, int target) {
  const std::vector<int>& t = run.adapter.targets;
  return std::find(t.begin(), t.end(), target) != t.end();
}

}  // namespace

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
      if (Wraps(run, p.target)) tensors.wrapped[LayerTensorBegin(layer) + static_cast<size_t>(p.layer_index)] = true;
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
  const bool cast = ab != e;
  for (const Projection& p : Projections(run.model)) {
    if (!Wraps(run, p.target)) continue;
    // LoraUpdateFunction saves A's output [tokens, r]; with dropout autograd saves the dropped
    // input and its mask instead of reusing x.
    a.kept += alloc(tokens * r * ab);
    if (run.adapter.dropout) a.kept += alloc(tokens * p.in * ab) + alloc(tokens * p.in);
    // Forward: x cast to the adapter dtype, then the update and the widened sum live with the
    // base output (which the full model already counts) before the cast back.
    const int64_t forward = std::max(cast ? alloc(tokens * p.in * ab) : 0,
                                     2 * alloc(tokens * p.out * ab));
    // Backward: the widened output gradient and its scaled copy, then x recast and x's
    // gradient in the adapter dtype and cast back.
    const int64_t backward = 2 * alloc(tokens * p.out * ab) + 2 * alloc(tokens * p.in * ab) +
                             (cast ? alloc(tokens * p.in * e) : 0);
    int64_t dequantize = 0;
    if (run.adapter.qlora) {
      // DequantizeNf4: int32 byte indices (2 bytes per element) and the weight in the compute dtype.
      dequantize = alloc(p.in * p.out / 2 * 4) + alloc(p.in * p.out * e);
    }
    a.forward_transient = std::max(a.forward_transient, std::max(forward, dequantize));
    a.backward_transient = std::max(a.backward_transient, std::max(backward, dequantize));
  }
  return a;
}

}  // namespace vramlab::server::estimate
