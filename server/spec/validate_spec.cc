#include "server/spec/validate_spec.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/resolve_spec.h"
#include "common/spec/spec_ranges.h"
#include "common/status_macros.h"
#include "schema/vramlab_v1.plain_proto.h"
#include "server/spec/command_spec.h"
#include "server/spec/display_text.h"

namespace vramlab::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", reason));
}

// A path on the daemon's host: absolute, bounded, no control characters. Whether it may be read
// (--allowed-dir) is host_paths.h's, checked at Submit.
absl::Status CheckHostPath(absl::string_view field, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (path.size() > spec_rules::kMaxHostPathBytes) return Invalid(field, "path too long");
  if (path[0] != '/') return Invalid(field, "must be an absolute path on the daemon's host");
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return Invalid(field, "contains a control character");
  }
  return absl::OkStatus();
}

spec_rules::ResolveContext ContextOf(const SpecLimits& limits) {
  spec_rules::ResolveContext context;
  context.device = static_cast<plain::DeviceKind>(limits.device);
  context.max_seq_len = limits.max_seq_len;
  context.max_steps = limits.max_steps;
  context.max_micro_batch_size = limits.max_micro_batch_size;
  context.max_grad_accum_steps = limits.max_grad_accum_steps;
  context.max_sweep_points = limits.max_sweep_points;
  return context;
}

// The rules that are the daemon's alone: what it lets a submitter ask of its host.
absl::Status CheckHostRules(const vramlab::v1::ExperimentSpec& spec,
                            const plain::ExperimentSpec& resolved, const SpecLimits& limits) {
  RETURN_IF_ERROR(CheckHostPath("model.weights_dir", spec.model().weights_dir()));
  RETURN_IF_ERROR(
      CheckHostPath("training.data.token_ids_file", spec.training().data().token_ids_file()));
  if (!spec.memory().snapshot_path().empty()) {
    return Invalid("memory.snapshot_path", "is set by the daemon; leave it empty");
  }
  if (limits.host_devices > 0 && resolved.parallel.world_size > limits.host_devices) {
    const bool cuda = limits.device == vramlab::v1::CUDA;
    return absl::FailedPreconditionError(
        absl::StrCat("spec.", spec_rules::kWorldSize.field, ": ", resolved.parallel.world_size,
                     " ranks need one device each; this daemon has ", limits.host_devices,
                     cuda ? " GPU(s)" : " CPU worker slot(s) (--cpu-slots)"));
  }
  if (spec.fault() != vramlab::v1::FAULT_UNSPECIFIED && !limits.allow_fault_injection) {
    return Invalid("fault", "fault injection is disabled (daemon flag --enable-fault-injection)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<plain::ExperimentSpec> ResolveSpec(const vramlab::v1::ExperimentSpec& spec,
                                                  const SpecLimits& limits) {
  // A command's own rules, then this function again on the rest of it (command_spec.h); what a
  // command runs is the submitter's program, not a resolved spec.
  if (IsCommand(spec)) {
    RETURN_IF_ERROR(ValidateCommandSpec(spec, limits));
    return plain::FromProto(spec);
  }
  // Field-sized checks first, so that one oversized field is named rather than the whole spec.
  if (spec.name().size() > spec_rules::kMaxNameBytes) {
    return Invalid("name", absl::StrCat("at most ", spec_rules::kMaxNameBytes, " bytes, got ",
                                        spec.name().size()));
  }
  const int64_t bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (bytes > limits.max_spec_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: ", bytes, " bytes, at most ", limits.max_spec_bytes, " allowed"));
  }
  RETURN_IF_ERROR(CheckDisplayText("spec.name", spec.name()));
  plain::ExperimentSpec resolved = plain::FromProto(spec);
  if (std::optional<spec_rules::SpecProblem> problem =
          spec_rules::ResolveAndValidate(resolved, ContextOf(limits))) {
    return Invalid(problem->field, problem->reason);
  }
  RETURN_IF_ERROR(CheckHostRules(spec, resolved, limits));
  return resolved;
}

absl::Status ValidateSpec(const vramlab::v1::ExperimentSpec& spec, const SpecLimits& limits) {
  return ResolveSpec(spec, limits).status();
}

}  // namespace vramlab::server
