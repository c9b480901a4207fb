// The one resolve-and-validate of an ExperimentSpec: fills every "0 means X" default of the proto
// and checks every rule, single-field ranges and the rules that span fields. The daemon (at Submit
// and EstimateMemory), the worker (on start) and the estimator (reading the resolved spec) all call
// it, so a spec one of them accepts is never refused by another, and a refusal names its field once
// in the same words everywhere.
//
// The spec is the plain view generated from proto/vramlab/v1 (schema/plain_proto.py); the daemon
// converts its protobuf message with plain::FromProto, the worker reads JSON with plain::ReadJson.
#ifndef VRAMLAB_COMMON_SPEC_RESOLVE_SPEC_H_
#define VRAMLAB_COMMON_SPEC_RESOLVE_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/spec/model_family.h"
#include "common/spec/spec_ranges.h"
#include "schema/vramlab_v1.plain.h"

namespace vramlab::spec_rules {

// Why a spec is refused: `field` is the snake_case path ("training.seq_len", "sweep.values[2]"),
// `reason` the rule's words without the field.
struct SpecProblem {
  std::string field;
  std::string reason;

  // "field: reason".
  std::string Text() const { return field.empty() ? reason : field + ": " + reason; }
};

// What the caller knows beyond the spec. Every member's default checks nothing extra.
struct ResolveContext {
  // The device the run would use: the daemon's. kUnspecified (the worker, whose spec's `device`
  // the daemon has set) checks the device rules against the spec's own `device` alone.
  plain::DeviceKind device = plain::DeviceKind::kUnspecified;
  // An operator's narrowing of the training ranges (vramlabd --max-seq-len ...); each is at most
  // the rule's own maximum.
  int64_t max_seq_len = kSeqLen.max;
  int64_t max_steps = kSteps.max;
  int64_t max_micro_batch_size = kMicroBatchSize.max;
  int64_t max_grad_accum_steps = kGradAccumSteps.max;
  int64_t max_sweep_points = kSweepPoints.max;
};

// Resolves `spec` in place and returns the first rule it breaks, or nullopt. After a nullopt:
// every defaulted field holds its value (training.seq_len is never 0, the optimizer kind is never
// unspecified, adapter targets are listed, sorted and unique, parallel.world_size >= 1, ...), and
// `device` is the context's when the spec left it unset. What needs the model's weights
// (a weights_dir's config.json) is checked later by ResolveAgainstModel.
std::optional<SpecProblem> ResolveAndValidate(plain::ExperimentSpec& spec,
                                              const ResolveContext& context);

// The shapes a model check needs.
struct ModelWidths {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
};

// The shapes of the model `spec` names without reading files (its config or its preset), or
// nullopt (a weights_dir). `spec` must have been resolved.
std::optional<ModelWidths> KnownModelWidths(const plain::ExperimentSpec& spec);

// The rules that need the model's shapes: training.data.token_id_bound (its default resolved to
// min(1000, vocab_size)) and training.adapter.rank against the wrapped layers.
std::optional<SpecProblem> ResolveAgainstModel(plain::ExperimentSpec& spec,
                                               const ModelWidths& model);

// A parallel run's ranks stay in step: each collective waits for every rank, so with world_size
// >= 2 nothing may consume a gradient before the ranks average it (training.optimizer.in_backward,
// then training.optimizer.delayed_update). ResolveAndValidate applies it to the spec's own world
// size; the estimator's world-size search to each size it tries.
std::optional<SpecProblem> CheckRanksInStep(int64_t world_size, bool in_backward,
                                            bool delayed_update);

// A resolved spec's predicates, named once.
inline bool AdapterEnabled(const plain::AdapterSpec& a) {
  return a.kind != plain::AdapterKind::kUnspecified;
}
// A sweep is asked for when it has values or SEARCH_MAX; otherwise the run is a single point.
inline bool SweepActive(const plain::SweepSpec& s) {
  return !s.values.empty() || s.mode == plain::SweepMode::kSearchMax;
}
inline bool ParallelActive(const plain::ParallelSpec& p) { return p.world_size >= 2; }

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_RESOLVE_SPEC_H_
