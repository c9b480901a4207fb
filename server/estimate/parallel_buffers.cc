#include "server/estimate/parallel_buffers.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/layout/parameter_partition.h"
#include "common/layout/shard_layout.h"
#include "common/spec/adapter_sizes.h"
#include "server/estimate/adapter_model.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {

std::vector<int64_t> ParameterTensorRows(const ModelShape& m) {
  std::vector<int64_t> rows;
  for (const spec_rules::ParameterTensorInfo& t :
       spec_rules::DecoderParameterTensors(m.Decoder())) {
    rows.push_back(t.shape.front());
  }
  return rows;
}

int64_t AdapterTensorRows(const RunSettings& run, size_t index, int64_t elements) {
  return index % 2 == 0 ? run.adapter.rank : elements / run.adapter.rank;
}

int64_t FullShardChunkElements(int64_t elements, int64_t rows, int64_t world_size) {
  if (rows <= 0) return elements;
  return layout::ShardLayout({rows, elements / rows}, static_cast<int>(world_size))
      .chunk_elements();
}

Nf4Buffers Nf4BufferElements(int64_t elements) {
  Nf4Buffers b;
  b.codes = spec_rules::Nf4CodeBytes(elements);
  b.absmax_codes = spec_rules::CeilDiv(elements, spec_rules::kNf4BlockSize);
  b.scales = spec_rules::CeilDiv(b.absmax_codes, spec_rules::kNf4AbsmaxBlockSize);
  return b;
}

BusiestRank BusiestOwner(const std::vector<int64_t>& numels,
                         const std::vector<int64_t>& owned_bytes, int64_t world_size) {
  const std::vector<int> owner = layout::PartitionParameters(numels, static_cast<int>(world_size));
  std::vector<int64_t> held(static_cast<size_t>(std::max<int64_t>(world_size, 1)), 0);
  for (size_t i = 0; i < numels.size(); ++i) held[owner[i]] += owned_bytes[i];
  BusiestRank busiest;
  busiest.rank = static_cast<int>(std::max_element(held.begin(), held.end()) - held.begin());
  busiest.owned.resize(numels.size());
  for (size_t i = 0; i < numels.size(); ++i) busiest.owned[i] = owner[i] == busiest.rank;
  return busiest;
}

ShardingUnits UnitsOf(const RunSettings& run) {
  // ParameterTensorElements' order: embed_tokens, the layers, then the final norm and
  // (untied) lm_head. Every layer is alike, so layer 0's tensors stand for each.
  const std::vector<int64_t> tensors = ParameterTensorElements(run.model);
  const std::vector<int64_t> rows = ParameterTensorRows(run.model);
  const size_t layer_end = LayerTensorBegin(run.model, run.model.num_layers);
  const int64_t n = run.parallel.world_size;
  const bool frozen = run.adapter.enabled();
  auto alloc = [&](int64_t bytes) { return AllocatedBytes(run.device, bytes); };
  // A trainable parameter's reduce-scatter: its padded gradient, and the chunk it receives
  // (staging only when added to an accumulating shard gradient).
  const bool accumulates = run.grad_accum_steps >= 2;
  auto reduce = [&](int64_t chunk, int64_t element_bytes) {
    return alloc(n * chunk * element_bytes) + (accumulates ? alloc(chunk * element_bytes) : 0);
  };
  const AdapterTensors adapters = ListAdapterTensors(run);
  ShardingUnits units;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t chunk = FullShardChunkElements(tensors[t], rows[t], n);
    int64_t gathered = alloc(n * chunk * run.dtype_bytes);
    if (run.adapter.qlora && adapters.wrapped[t]) {
      // The emptied base weight gathers nothing; its NF4 buffers are gathered padded.
      const Nf4Buffers nf4 = Nf4BufferElements(tensors[t]);
      auto padded = [&](int64_t elements) { return n * spec_rules::CeilDiv(elements, n); };
      gathered = alloc(padded(nf4.codes)) + alloc(padded(nf4.absmax_codes)) +
                 alloc(4 * padded(nf4.scales));
    }
    const int64_t gradient = frozen ? 0 : alloc(tensors[t] * run.dtype_bytes);
    const int64_t reduced = frozen ? 0 : reduce(chunk, run.dtype_bytes);
    if (t == 0 || t >= layer_end) {
      units.root_gathered_bytes += gathered;
      units.root_gradient_bytes += gradient;
      units.root_reduce_bytes += reduced;
    } else if (t < LayerTensorBegin(run.model, 1)) {
      units.layer_gathered_bytes += gathered;
      units.layer_gradient_bytes += gradient;
      units.layer_reduce_bytes += reduced;
    }
  }
  // The adapters live in the layers: layer 0's (the first layer_trainable.size() entries).
  for (size_t a = 0; a < adapters.layer_trainable.size(); ++a) {
    const int64_t e = adapters.layer_trainable[a];
    const int64_t chunk = FullShardChunkElements(e, AdapterTensorRows(run, a, e), n);
    units.layer_gathered_bytes += alloc(n * chunk * run.adapter.dtype_bytes);
    units.layer_gradient_bytes += alloc(e * run.adapter.dtype_bytes);
    units.layer_reduce_bytes += reduce(chunk, run.adapter.dtype_bytes);
  }
  return units;
}

ReduceScatterPeaks WalkReduceScatters(const ShardingUnits& units, int64_t layers, bool prefetch) {
  ReduceScatterPeaks peaks;
  auto observe = [&](int64_t in_flight, int64_t held_by_autograd) {
    peaks.in_flight = std::max(peaks.in_flight, in_flight);
    peaks.with_unreduced = std::max(peaks.with_unreduced, in_flight + held_by_autograd);
  };
  // A unit's post-backward issues its reduce-scatter (none for a unit with nothing trainable),
  // then waits for the one before it (prefetch) or for its own.
  int64_t pending = 0;
  auto post_backward = [&](int64_t reduce_bytes, int64_t held_after) {
    if (reduce_bytes == 0) return;
    observe(pending + reduce_bytes, held_after);
    pending = prefetch ? reduce_bytes : 0;
  };
  const int64_t root = units.root_gradient_bytes;
  observe(0, root);  // the loss's backward: the head's gradient first
  for (int64_t i = 0; i < layers; ++i) {
    observe(pending, root + units.layer_gradient_bytes);  // the layer's backward
    post_backward(units.layer_reduce_bytes, root);
  }
  observe(pending, root);  // the embedding's backward
  post_backward(units.root_reduce_bytes, 0);
  return peaks;
}

void AddParallelBuffers(const RunSettings& run, ParameterState* params) {
  const ParallelSettings& par = run.parallel;
  params->gathered_parameters = 0;
  params->communication_buffer = 0;
  params->unreduced_gradients = 0;
  if (!par.parallel()) return;
  // SHARD_NONE and SHARD_OPTIMIZER all-reduce the gradients themselves, in place: nothing beside
  // them (worker/parallel/gradient_reduction.h).
  if (!par.shards_gradients()) return;
  if (!par.shards_parameters()) {
    // SHARD_GRADIENTS: each layer's gradients are reduced to their owners once the layer's
    // backward is done; the rank holds the others' from the part of backward that makes them until
    // that reduce completes, at the next layer's post-backward (the root's until after backward):
    // ParameterState::others_gradients, which the step walk adds and takes off. The buffer is
    // the part held by reduces in flight, at its largest.
    params->communication_buffer = params->others_gradients.MostInFlight();
    return;
  }
  const ShardingUnits units = UnitsOf(run);
  const ReduceScatterPeaks reduce = WalkReduceScatters(units, run.model.num_layers, par.prefetch);
  params->communication_buffer = reduce.in_flight;
  params->unreduced_gradients = reduce.with_unreduced - reduce.in_flight;
  const int64_t layers_gathered =
      par.reshard_after_forward ? std::min<int64_t>(par.prefetch ? 2 : 1, run.model.num_layers)
                                : run.model.num_layers;
  params->gathered_parameters =
      units.root_gathered_bytes + layers_gathered * units.layer_gathered_bytes;
}

std::string ParallelNote(const RunSettings& run) {
  const ParallelSettings& par = run.parallel;
  const bool adapter = run.adapter.enabled();
  // Whole tensors per owner (the worker's largest-first partition); the busiest rank is shown.
  const bool partitioned = par.shards_optimizer_state() && !par.shards_parameters();
  const int shown = partitioned ? EstimateParameterState(run).reported_rank : 0;
  const std::string owned =
      absl::StrCat("of the ", adapter ? "adapters" : "parameters",
                   " each rank owns (the worker's largest-first partition of whole tensors; rank ",
                   shown, ", owning the most, is shown)");
  std::string layout;
  if (par.shards_parameters()) {
    layout = absl::StrCat(
        "every parameter", adapter ? " (the frozen base weights and the adapters)" : "",
        " is sharded on dim 0 in chunks padded to equal size, with its gradient and optimizer "
        "state; the root unit (embeddings, final norm, lm_head) stays gathered through forward "
        "and backward, and ",
        !par.reshard_after_forward ? "all decoder layers (no reshard after forward) are"
        : par.prefetch             ? "two decoder layers at a time (the next one's all-gather is "
                                     "issued while one runs) are"
                                   : "one decoder layer at a time is",
        " gathered; ",
        par.prefetch ? "up to two units' reduce-scatters in flight (one issued before the "
                       "previous is waited for), "
                     : "one unit's reduce-scatter in flight at a time, ",
        adapter ? "of the layers' adapter gradients (the root has nothing trainable)"
                : "besides the root's full gradients, held until after backward");
  } else if (par.shards_gradients()) {
    layout = absl::StrCat("gradients and optimizer state ", owned,
                          "; every gradient is whole until it is reduced to its owner, a decoder "
                          "layer at a time during backward (the others' of at most two layers "
                          "alive at once), the root's after it");
  } else {
    layout =
        absl::StrCat(par.shards_optimizer_state() ? absl::StrCat("optimizer state ", owned, "; ")
                                                  : "every rank holds all model states; ",
                     "gradients all-reduced in place a decoder layer at a time during "
                     "backward (at most two layers' in flight), the root's after it");
  }
  if (run.adapter.qlora) {
    layout +=
        par.shards_parameters()
            ? "; QLoRA's NF4 codes and absmax constants sharded and gathered with their layer "
              "(the lookup tables on every rank)"
            : "; QLoRA's NF4 base weights and constants on every rank";
  }
  if (par.shards_parameters() && run.device == Device::kCuda && !run.adapter.qlora) {
    // DataParallel::BuildDevice: the whole model on each rank's host during LOAD.
    const int64_t whole = ParameterCount(run.model) * run.dtype_bytes;
    layout += absl::StrFormat(
        "; in LOAD each rank builds the whole model in host memory (%.2f GiB of weights, %d "
        "copies on one host) and copies only its shards to the device",
        static_cast<double>(whole) / kGiB, par.world_size);
  }
  return absl::StrCat("per rank (world size ", par.world_size, ", ", plain::EnumName(par.sharding),
                      "): ", layout, "; activations are one rank's micro-batch, as in one process");
}

}  // namespace vramlab::server::estimate
