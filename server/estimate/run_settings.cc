#include "server/estimate/run_settings.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/resolve_spec.h"
#include "common/status_macros.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::server::estimate {

absl::Status CheckRanksRunnable(const RunSettings& run, const ParallelSettings& parallel) {
  if (std::optional<spec_rules::SpecProblem> problem =
          spec_rules::CheckRanksInStep(parallel.world_size, run.in_backward, run.delayed_update)) {
    return absl::InvalidArgumentError(problem->Text());
  }
  return absl::OkStatus();
}

absl::StatusOr<RunSettings> ResolveRunSettings(const vramlab::v1::ExperimentSpec& spec) {
  // The one rulebook (common/spec/resolve_spec.h): the estimator reads the values the worker runs.
  plain::ExperimentSpec resolved = plain::FromProto(spec);
  if (std::optional<spec_rules::SpecProblem> problem =
          spec_rules::ResolveAndValidate(resolved, {})) {
    return absl::InvalidArgumentError(problem->Text());
  }
  return SettingsOf(spec, resolved);
}

absl::StatusOr<RunSettings> SettingsOf(const vramlab::v1::ExperimentSpec& spec,
                                       const plain::ExperimentSpec& resolved) {
  RunSettings r;
  ASSIGN_OR_RETURN(r.model, ResolveModelShape(spec.model()));
  r.device = resolved.device == plain::DeviceKind::kCpu ? Device::kCpu : Device::kCuda;

  const plain::TrainingSpec& t = resolved.training;
  r.dtype_bytes = t.dtype == plain::DType::kFloat32 ? 4 : 2;
  r.micro_batch = t.micro_batch_size;
  r.seq_len = t.seq_len;
  r.grad_accum_steps = t.grad_accum_steps;
  r.steps = t.steps;
  r.checkpoint_every_k = t.checkpoint_every_k_layers;
  r.loss_chunk_tokens = t.loss_chunk_tokens;
  r.optimizer = static_cast<vramlab::v1::OptimizerKind>(t.optimizer.kind);
  r.sgd_weight_decay = t.optimizer.weight_decay != 0.0;
  r.offload_to_cpu = t.optimizer.offload_to_cpu;
  r.in_backward = t.optimizer.in_backward;
  r.delayed_update = t.optimizer.delayed_update;
  r.eager_attention = t.attention == plain::AttentionImpl::kEager;
  r.chunked_loss = t.loss == plain::LossImpl::kChunked;
  r.fused_kernels = t.kernels == plain::KernelsImpl::kFused;
  const plain::AdapterSpec& adapter = t.adapter;
  if (spec_rules::AdapterEnabled(adapter)) {
    r.adapter.lora = true;
    r.adapter.qlora = adapter.kind == plain::AdapterKind::kQlora;
    r.adapter.rank = adapter.rank;
    r.adapter.dtype_bytes = adapter.dtype == plain::DType::kFloat32 ? 4 : 2;
    r.adapter.dropout = adapter.dropout > 0;
    for (plain::AdapterTarget target : adapter.target_modules)
      r.adapter.targets.push_back(static_cast<int>(target));
  }
  const plain::ParallelSpec& p = resolved.parallel;
  r.parallel = ParallelSettings(p);
  RETURN_IF_ERROR(CheckRanksRunnable(r, r.parallel));
  return r;
}

}  // namespace vramlab::server::estimate
