// The settings of a spec that decide its memory, with the proto's "0 means default" rules applied
// once, so the arithmetic never sees an unset field.
#ifndef VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_H_
#define VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/parallel_rules.h"
#include "schema/vramlab_v1.plain.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server::estimate {

// training.adapter, resolved (PEFT's defaults applied, targets listed).
struct AdapterSettings {
  bool lora = false;   // LoRA or QLoRA
  bool qlora = false;  // base projections in NF4
  int64_t rank = 8;
  int64_t dtype_bytes = 4;   // the adapter weights' (fp32 unless set)
  bool dropout = false;      // dropout > 0
  std::vector<int> targets;  // proto AdapterTarget values, never empty with an adapter

  bool enabled() const { return lora; }
};

// spec.parallel as ResolveAndValidate leaves it (world_size >= 1, sharding and prefetch set): one
// rank of a data-parallel run (docs/PARALLEL.md), with the predicates the estimator asks of it.
// world_size 1 is one process whatever the sharding, so every predicate is false there.
struct ParallelSettings : plain::ParallelSpec {
  ParallelSettings() {
    world_size = 1;
    sharding = plain::Sharding::kShardNone;
    prefetch = spec_rules::kDefaultPrefetch;
  }
  explicit ParallelSettings(const plain::ParallelSpec& resolved) : plain::ParallelSpec(resolved) {}

  bool parallel() const { return world_size > 1; }
  bool shards_optimizer_state() const {
    return parallel() && sharding != plain::Sharding::kShardNone;
  }
  bool shards_gradients() const {
    return parallel() && (sharding == plain::Sharding::kShardGradients ||
                          sharding == plain::Sharding::kShardFull);
  }
  bool shards_parameters() const { return parallel() && sharding == plain::Sharding::kShardFull; }
  // SHARD_GRADIENTS: whole gradients, each kept after backward by its owner alone.
  bool partitions_gradients() const {
    return parallel() && sharding == plain::Sharding::kShardGradients;
  }
  // Elements of one rank's shard of a tensor of `n` elements: ceil(n / world_size).
  int64_t ShardElements(int64_t n) const { return (n + world_size - 1) / world_size; }
};

struct RunSettings {
  ModelShape model;
  Device device = Device::kCuda;
  int64_t dtype_bytes = 2;  // parameters, gradients and activations
  int64_t micro_batch = 1;
  int64_t seq_len = 512;
  int64_t grad_accum_steps = 1;
  int64_t steps = 1;
  vramlab::v1::OptimizerKind optimizer = vramlab::v1::ADAMW;
  bool offload_to_cpu = false;
  bool in_backward = false;
  // The offloaded host step runs one optimizer step late (training.optimizer.delayed_update).
  bool delayed_update = false;
  // Whether the update adds weight_decay * param to the gradient (SGD; default 0.01).
  bool sgd_weight_decay = true;
  int64_t checkpoint_every_k = 0;  // 0: none
  bool eager_attention = true;
  bool chunked_loss = false;
  int64_t loss_chunk_tokens = 1024;
  bool fused_kernels = false;  // training.kernels FUSED (activation_model.cc, docs/KERNELS.md)
  AdapterSettings adapter;
  ParallelSettings parallel;
  // A later point of a one-process sweep: its worker ran other points first. Each point's
  // teardown empties the cache; the segments that still hold a live block (the CUDA libraries'
  // workspaces among them) stay, and the replay does not see them. The verdict's band is then the
  // one measured on such points (replay_verdict.h); the replay itself models a fresh process.
  bool after_other_points = false;

  int64_t tokens() const { return micro_batch * seq_len; }
};

// `spec` resolved by common/spec's ResolveAndValidate (the worker's rules); INVALID_ARGUMENT naming
// the field of the first rule it breaks.
absl::StatusOr<RunSettings> ResolveRunSettings(const vramlab::v1::ExperimentSpec& spec);

// The settings of `resolved`, `spec` resolved by spec_rules::ResolveAndValidate (the model's shape
// is read from `spec`'s model: a preset, a config or a weights_dir's config.json).
absl::StatusOr<RunSettings> SettingsOf(const vramlab::v1::ExperimentSpec& spec,
                                       const plain::ExperimentSpec& resolved);

// OK unless the rulebook refuses to run `run` over `parallel`'s ranks (world size >= 2), in its
// words: spec_rules::CheckRanksInStep (an in-backward or delayed update would consume a gradient
// before the ranks average it). The world-size search skips the sizes this refuses.
absl::Status CheckRanksRunnable(const RunSettings& run, const ParallelSettings& parallel);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_H_
