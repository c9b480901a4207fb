// Shared by the per-rank estimate tests (parallel_estimate_test.cc: full fine-tuning;
// parallel_adapter_estimate_test.cc: adapters): a preset's tensors from its config, the byte
// rules the expected values use, and the spec and estimate calls. Test-only.
#ifndef VRAMLAB_SERVER_ESTIMATE_PARALLEL_ESTIMATE_TEST_UTIL_H_
#define VRAMLAB_SERVER_ESTIMATE_PARALLEL_ESTIMATE_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/model_presets.h"
#include "gtest/gtest.h"
#include "server/estimate/estimator.h"

namespace vramlab::server::parallel_test {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::Sharding;

inline constexpr int64_t kBf16 = 2;
inline constexpr int64_t kMiB = int64_t{1} << 20;

// Qwen2's parameter tensors from a preset's config, grouped by unit: elements and rows (dim 0).
struct Tensors {
  std::vector<int64_t> root, root_rows;    // embed_tokens, final norm, lm_head when untied
  std::vector<int64_t> layer, layer_rows;  // one decoder layer (every layer is alike)
  int64_t layers = 0;
};

inline Tensors TensorsOf(const std::string& preset_name) {
  const spec_rules::ModelPreset* p = spec_rules::FindModelPreset(preset_name);
  EXPECT_NE(p, nullptr) << preset_name;
  const int64_t h = p->hidden_size, i = p->intermediate_size, v = p->vocab_size;
  const int64_t kv = p->num_key_value_heads * (h / p->num_attention_heads);
  Tensors t;
  t.layers = p->num_hidden_layers;
  t.root = {v * h, h};
  t.root_rows = {v, h};
  if (!p->tie_word_embeddings) {
    t.root.push_back(v * h);
    t.root_rows.push_back(v);
  }
  // q, k, v (weights and biases), o; gate, up, down; input and post-attention norms.
  t.layer = {h * h, h, kv * h, kv, kv * h, kv, h * h, i * h, i * h, h * i, h, h};
  t.layer_rows = {h, h, kv, kv, kv, kv, h, i, i, h, h, h};
  return t;
}

// What one allocation of `bytes` costs on the device: CUDA rounds blocks to 512 bytes.
inline int64_t Device(bool cuda, int64_t bytes) { return cuda ? (bytes + 511) / 512 * 512 : bytes; }

// SHARD_FULL's chunk (common/layout/shard_layout.h): ceil(rows / N) rows, padded.
inline int64_t Chunk(int64_t elements, int64_t rows, int64_t n) {
  return (rows + n - 1) / n * (elements / rows);
}

// SHARD_FULL's reduce-scatters in flight at once (worker/parallel/full_shard.h): the units are
// reduced from the top layer down, then the root (`root` 0 when it has nothing trainable); with
// prefetch a unit's is waited for only after the next one is issued, so two are in flight then
// (two layers, or layer 0 and the root); without, one at a time. `layer`, `root`: one unit's
// reduce-scatter bytes.
inline int64_t InFlight(int64_t layer, int64_t root, bool prefetch) {
  return prefetch ? std::max(2 * layer, layer + root) : std::max(layer, root);
}

// SHARD_GRADIENTS' communication buffer: the others' gradients held by the reduces in flight at
// once while each decoder layer's are reduced to their owners during backward, at most two units'
// at a time (worker/parallel/gradient_reduction.h): two adjacent layers', or layer 0's with the
// root's (those made before the layers and the embedding's), which are reduced after backward.
inline int64_t OthersInFlightAtMost(int64_t before_layers, int64_t embedding,
                                    const std::vector<int64_t>& layers) {
  int64_t most = before_layers + embedding + (layers.empty() ? 0 : layers.front());
  for (size_t j = 0; j + 1 < layers.size(); ++j) most = std::max(most, layers[j] + layers[j + 1]);
  return most;
}

struct Expected {
  int64_t weights = 0, gradients = 0, state = 0;  // per rank
  int64_t gathered = 0, communication = 0;
};

// A spec of `preset` over `n` ranks: seq 512 on CUDA, 64 on the CPU, two steps; `prefetch`
// false sets parallel.prefetch (SHARD_FULL only), true leaves it unset (its default).
inline ExperimentSpec Spec(const std::string& preset, bool cuda, int32_t n, Sharding sharding,
                           bool reshard = false, bool prefetch = true) {
  ExperimentSpec spec;
  spec.mutable_model()->set_preset(preset);
  spec.mutable_training()->set_seq_len(cuda ? 512 : 64);
  spec.mutable_training()->set_steps(2);
  spec.set_device(cuda ? vramlab::v1::CUDA : vramlab::v1::CPU);
  spec.mutable_parallel()->set_world_size(n);
  spec.mutable_parallel()->set_sharding(sharding);
  spec.mutable_parallel()->set_reshard_after_forward(reshard);
  if (!prefetch) spec.mutable_parallel()->set_prefetch(false);
  return spec;
}

// The estimate, failing the test (and returning an empty one) when it is refused.
inline MemoryEstimate MustEstimate(const ExperimentSpec& spec, int64_t limit = 0,
                                   EstimateOptions options = {}) {
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(spec, limit, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : MemoryEstimate();
}

// Every sharding mode, in the proto's order.
inline constexpr Sharding kModes[] = {vramlab::v1::SHARD_NONE, vramlab::v1::SHARD_OPTIMIZER,
                                      vramlab::v1::SHARD_GRADIENTS, vramlab::v1::SHARD_FULL};

}  // namespace vramlab::server::parallel_test

#endif  // VRAMLAB_SERVER_ESTIMATE_PARALLEL_ESTIMATE_TEST_UTIL_H_
