#include "server/estimate/run_settings.h"

#include "common/spec/spec_rules.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace vramlab::server::estimate {
namespace {

using vramlab::v1::TrainingSpec;

// Applies "0 means `fallback`"; negative values are an error naming `field`.
absl::StatusOr<int64_t> CountOrDefault(int64_t value, int64_t fallback, const char* field) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must not be negative, got ", value));
  }
  return value == 0 ? fallback : value;
}

absl::StatusOr<int64_t> DtypeBytes(vramlab::v1::DType dtype) {
  switch (dtype) {
    case vramlab::v1::DTYPE_UNSPECIFIED:
    case vramlab::v1::BFLOAT16:
    case vramlab::v1::FLOAT16:
      return 2;
    case vramlab::v1::FLOAT32:
      return 4;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("training.dtype: unknown value ", static_cast<int>(dtype)));
  }
}

absl::StatusOr<ParallelSettings> ResolveParallel(const vramlab::v1::ExperimentSpec& spec,
                                                 const RunSettings& run) {
  const vramlab::v1::ParallelSpec& p = spec.parallel();
  ParallelSettings out;
  ASSIGN_OR_RETURN(out.world_size,
                   CountOrDefault(p.world_size(), 1, spec_rules::kWorldSize.field));
  switch (p.sharding()) {
    case vramlab::v1::SHARDING_UNSPECIFIED:
      out.sharding = vramlab::v1::SHARD_NONE;
      break;
    case vramlab::v1::SHARD_NONE:
    case vramlab::v1::SHARD_OPTIMIZER:
    case vramlab::v1::SHARD_GRADIENTS:
    case vramlab::v1::SHARD_FULL:
      out.sharding = p.sharding();
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(spec_rules::kShardingField,
                                                     ": unknown value ", p.sharding()));
  }
  out.reshard_after_forward = p.reshard_after_forward();
  out.prefetch = p.has_prefetch() ? p.prefetch() : spec_rules::kDefaultPrefetch;
  RETURN_IF_ERROR(CheckRanksRunnable(run, out));
  return out;
}

}  // namespace

absl::Status CheckRanksRunnable(const RunSettings& run, const ParallelSettings& parallel) {
  if (!parallel.parallel()) return absl::OkStatus();
  // The worker's words (worker/spec/validate_spec.cc, ValidateParallel).
  if (run.in_backward) {
    return absl::InvalidArgumentError(
        "training.optimizer.in_backward: a parallel run averages each gradient over the ranks "
        "before the update; an in-backward update would apply it first");
  }
  return absl::OkStatus();
}

absl::StatusOr<RunSettings> ResolveRunSettings(const vramlab::v1::ExperimentSpec& spec) {
  RunSettings r;
  ASSIGN_OR_RETURN(r.model, ResolveModelShape(spec.model()));
  r.device = spec.device() == vramlab::v1::CPU ? Device::kCpu : Device::kCuda;

  const TrainingSpec& t = spec.training();
  ASSIGN_OR_RETURN(r.dtype_bytes, DtypeBytes(t.dtype()));
  ASSIGN_OR_RETURN(r.micro_batch,
                   CountOrDefault(t.micro_batch_size(), spec_rules::kDefaultMicroBatchSize, "training.micro_batch_size"));
  ASSIGN_OR_RETURN(r.seq_len, CountOrDefault(t.seq_len(), spec_rules::kDefaultSeqLen, "training.seq_len"));
  ASSIGN_OR_RETURN(r.grad_accum_steps,
                   CountOrDefault(t.grad_accum_steps(), spec_rules::kDefaultGradAccumSteps, "training.grad_accum_steps"));
  ASSIGN_OR_RETURN(r.steps, CountOrDefault(t.steps(), spec_rules::kDefaultSteps, "training.steps"));
  ASSIGN_OR_RETURN(r.checkpoint_every_k, CountOrDefault(t.checkpoint_every_k_layers(), 0,
                                                        "training.checkpoint_every_k_layers"));
  ASSIGN_OR_RETURN(r.loss_chunk_tokens,
                   CountOrDefault(t.loss_chunk_tokens(), spec_rules::kDefaultLossChunkTokens, "training.loss_chunk_tokens"));

  switch (t.optimizer().kind()) {
    case vramlab::v1::OPTIMIZER_KIND_UNSPECIFIED:
    case vramlab::v1::ADAMW:
      r.optimizer = vramlab::v1::ADAMW;
      break;
    case vramlab::v1::ADAMW_FP32_MASTER:
    case vramlab::v1::SGD:
    case vramlab::v1::ADAMW_8BIT:
      r.optimizer = t.optimizer().kind();
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "training.optimizer.kind: unknown value ", static_cast<int>(t.optimizer().kind())));
  }
  r.sgd_weight_decay =
      !t.optimizer().has_weight_decay() || t.optimizer().weight_decay() != 0.0;
  r.offload_to_cpu = t.optimizer().offload_to_cpu();
  r.in_backward = t.optimizer().in_backward();
  if (r.in_backward && r.grad_accum_steps > 1) {
    return absl::InvalidArgumentError(
        "training.optimizer.in_backward: requires grad_accum_steps == 1 (each gradient is "
        "consumed and freed as soon as it is complete)");
  }

  switch (t.attention()) {
    case vramlab::v1::ATTENTION_IMPL_UNSPECIFIED:
    case vramlab::v1::EAGER:
      r.eager_attention = true;
      break;
    case vramlab::v1::SDPA:
      r.eager_attention = false;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("training.attention: unknown value ", static_cast<int>(t.attention())));
  }
  switch (t.loss()) {
    case vramlab::v1::LOSS_IMPL_UNSPECIFIED:
    case vramlab::v1::FULL:
      r.chunked_loss = false;
      break;
    case vramlab::v1::CHUNKED:
      r.chunked_loss = true;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("training.loss: unknown value ", static_cast<int>(t.loss())));
  }
  switch (t.kernels()) {
    case vramlab::v1::KERNELS_IMPL_UNSPECIFIED:
    case vramlab::v1::ATEN:
      r.fused_kernels = false;
      break;
    case vramlab::v1::FUSED:
      r.fused_kernels = true;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("training.kernels: unknown value ", static_cast<int>(t.kernels())));
  }
  const vramlab::v1::AdapterSpec& adapter = t.adapter();
  if (adapter.kind() != vramlab::v1::ADAPTER_KIND_UNSPECIFIED) {
    r.adapter.lora = true;
    r.adapter.qlora = adapter.kind() == vramlab::v1::QLORA;
    ASSIGN_OR_RETURN(r.adapter.rank, CountOrDefault(adapter.rank(), spec_rules::kDefaultAdapterRank,
                                                    "training.adapter.rank"));
    if (adapter.dtype() != vramlab::v1::DTYPE_UNSPECIFIED) {
      ASSIGN_OR_RETURN(r.adapter.dtype_bytes, DtypeBytes(adapter.dtype()));
    }
    r.adapter.dropout = adapter.dropout() > 0;
    for (int target : adapter.target_modules()) r.adapter.targets.push_back(target);
    if (r.adapter.targets.empty()) {
      for (int target = 1; target <= spec_rules::kNumAdapterTargets; ++target) r.adapter.targets.push_back(target);
    }
  }
  if (spec.memory().device_memory_limit_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory.device_memory_limit_bytes: must not be negative, got ",
        spec.memory().device_memory_limit_bytes()));
  }
  ASSIGN_OR_RETURN(r.parallel, ResolveParallel(spec, r));
  return r;
}

}  // namespace vramlab::server::estimate
