// JSON -> ExperimentSpec. Field lists mirror proto/vramlab/v1/experiment.proto; a field added
// there must be added here too (the contract test feeds the daemon's specs through this parser).
#include <string>

#include <nlohmann/json.hpp>

#include "worker/spec/experiment_spec.h"
#include "worker/spec/json_object_reader.h"
#include "worker/spec/validate_spec.h"

namespace vramlab::worker {
namespace {

const EnumNames kDTypeNames = {{"DTYPE_UNSPECIFIED", 0}, {"BFLOAT16", 1}, {"FLOAT32", 2}, {"FLOAT16", 3}};
const EnumNames kPriorityNames = {
    {"PRIORITY_UNSPECIFIED", 0}, {"PRIORITY_LOW", 1}, {"PRIORITY_NORMAL", 2}, {"PRIORITY_HIGH", 3}};
const EnumNames kOptimizerNames = {{"OPTIMIZER_KIND_UNSPECIFIED", 0}, {"ADAMW", 1}, {"ADAMW_FP32_MASTER", 2},
                                   {"SGD", 3}, {"ADAMW_8BIT", 4}};
const EnumNames kAttentionNames = {{"ATTENTION_IMPL_UNSPECIFIED", 0}, {"EAGER", 1}, {"SDPA", 2}};
const EnumNames kLossNames = {{"LOSS_IMPL_UNSPECIFIED", 0}, {"FULL", 1}, {"CHUNKED", 2}};
const EnumNames kKernelsNames = {{"KERNELS_IMPL_UNSPECIFIED", 0}, {"ATEN", 1}, {"FUSED", 2}};
const EnumNames kAdapterKindNames = {{"ADAPTER_KIND_UNSPECIFIED", 0}, {"LORA", 1}, {"QLORA", 2}};
const EnumNames kAdapterTargetNames = {{"ADAPTER_TARGET_UNSPECIFIED", 0}, {"Q_PROJ", 1}, {"K_PROJ", 2},
                                       {"V_PROJ", 3}, {"O_PROJ", 4}, {"GATE_PROJ", 5}, {"UP_PROJ", 6},
                                       {"DOWN_PROJ", 7}};
const EnumNames kSweepVariableNames = {{"SWEEP_VARIABLE_UNSPECIFIED", 0}, {"SEQ_LEN", 1}, {"MICRO_BATCH_SIZE", 2}};
const EnumNames kSweepModeNames = {{"SWEEP_MODE_UNSPECIFIED", 0}, {"LIST", 1}, {"SEARCH_MAX", 2}};
const EnumNames kDeviceNames = {{"DEVICE_KIND_UNSPECIFIED", 0}, {"CUDA", 1}, {"CPU", 2}};
const EnumNames kShardingNames = {{"SHARDING_UNSPECIFIED", 0}, {spec_rules::kShardingNames[0], 1},
                                  {spec_rules::kShardingNames[1], 2}, {spec_rules::kShardingNames[2], 3},
                                  {spec_rules::kShardingNames[3], 4}};
const EnumNames kFaultNames = {{"FAULT_UNSPECIFIED", 0}, {"SEGFAULT", 1},        {"ABORT", 2},
                               {"HANG", 3},              {"EXIT_MID_STREAM", 4}, {"FLOOD_OUTPUT", 5},
                               {"INVALID_JSON", 6},      {"HUGE_LINE", 7}};

SpecModelConfig ReadModelConfig(const nlohmann::json& json) {
  JsonObjectReader r(json, "model.config",
                     {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                      "num_key_value_heads", "max_position_embeddings", "rope_theta", "rms_norm_eps",
                      "tie_word_embeddings", "initializer_range", "model_type", "head_dim", "attention_bias",
                      "mlp_bias", "rope_scaling", "sliding_window", "use_sliding_window", "max_window_layers"});
  SpecModelConfig c;
  c.present = !json.empty();
  c.vocab_size = r.Int32("vocab_size");
  c.hidden_size = r.Int32("hidden_size");
  c.intermediate_size = r.Int32("intermediate_size");
  c.num_hidden_layers = r.Int32("num_hidden_layers");
  c.num_attention_heads = r.Int32("num_attention_heads");
  c.num_key_value_heads = r.Int32("num_key_value_heads");
  c.max_position_embeddings = r.Int32("max_position_embeddings");
  c.rope_theta = r.Double("rope_theta");
  c.rms_norm_eps = r.Double("rms_norm_eps");
  c.tie_word_embeddings = r.Bool("tie_word_embeddings");
  c.initializer_range = r.Double("initializer_range");
  c.model_type = r.String("model_type");
  c.head_dim = r.Int32("head_dim");
  if (r.Has("attention_bias")) c.attention_bias = r.Bool("attention_bias");
  if (r.Has("mlp_bias")) c.mlp_bias = r.Bool("mlp_bias");
  JsonObjectReader rope(r.Object("rope_scaling"), "model.config.rope_scaling",
                        {"rope_type", "factor", "low_freq_factor", "high_freq_factor",
                         "original_max_position_embeddings"});
  c.rope_scaling = {rope.String("rope_type"), rope.Double("factor"), rope.Double("low_freq_factor"),
                    rope.Double("high_freq_factor"), rope.Int32("original_max_position_embeddings")};
  c.sliding_window = r.Int32("sliding_window");
  c.use_sliding_window = r.Bool("use_sliding_window");
  if (r.Has("max_window_layers")) c.max_window_layers = r.Int32("max_window_layers");
  return c;
}

SpecModel ReadModel(const nlohmann::json& json) {
  JsonObjectReader r(json, "model", {"preset", "config", "weights_dir", "init_seed"});
  SpecModel m;
  m.preset = r.String("preset");
  m.config = ReadModelConfig(r.Object("config"));
  m.weights_dir = r.String("weights_dir");
  m.init_seed = r.UInt32("init_seed");
  return m;
}

SpecOptimizer ReadOptimizer(const nlohmann::json& json) {
  JsonObjectReader r(json, "training.optimizer",
                     {"kind", "learning_rate", "beta1", "beta2", "epsilon", "weight_decay", "momentum",
                      "offload_to_cpu", "in_backward", "delayed_update"});
  SpecOptimizer o;
  o.kind = static_cast<SpecOptimizerKind>(r.Enum("kind", kOptimizerNames));
  o.learning_rate = r.Double("learning_rate");
  o.beta1 = r.Double("beta1");
  o.beta2 = r.Double("beta2");
  o.epsilon = r.Double("epsilon");
  // `optional double`: presence matters, an explicit 0 disables weight decay.
  o.weight_decay = r.Has("weight_decay") ? r.Double("weight_decay") : spec_rules::kDefaultWeightDecay;
  o.momentum = r.Double("momentum");
  o.offload_to_cpu = r.Bool("offload_to_cpu");
  o.in_backward = r.Bool("in_backward");
  o.delayed_update = r.Bool("delayed_update");
  return o;
}

SpecAdapter ReadAdapter(const nlohmann::json& json) {
  JsonObjectReader r(json, "training.adapter", {"kind", "rank", "alpha", "dropout", "target_modules", "dtype"});
  SpecAdapter a;
  a.kind = static_cast<SpecAdapterKind>(r.Enum("kind", kAdapterKindNames));
  a.rank = r.Int32("rank");
  a.alpha = r.Double("alpha");
  a.dropout = r.Double("dropout");
  a.target_modules = r.RepeatedEnum("target_modules", kAdapterTargetNames);
  a.dtype = static_cast<SpecDType>(r.Enum("dtype", kDTypeNames));
  return a;
}

SpecTraining ReadTraining(const nlohmann::json& json) {
  JsonObjectReader r(json, "training",
                     {"micro_batch_size", "grad_accum_steps", "seq_len", "steps", "dtype", "optimizer",
                      "checkpoint_every_k_layers", "attention", "loss", "loss_chunk_tokens", "data", "adapter",
                      "kernels"});
  SpecTraining t;
  t.micro_batch_size = r.Int32("micro_batch_size");
  t.grad_accum_steps = r.Int32("grad_accum_steps");
  t.seq_len = r.Int32("seq_len");
  t.steps = r.Int32("steps");
  t.dtype = static_cast<SpecDType>(r.Enum("dtype", kDTypeNames));
  t.optimizer = ReadOptimizer(r.Object("optimizer"));
  t.checkpoint_every_k_layers = r.Int32("checkpoint_every_k_layers");
  t.attention = static_cast<SpecAttention>(r.Enum("attention", kAttentionNames));
  t.loss = static_cast<SpecLoss>(r.Enum("loss", kLossNames));
  t.loss_chunk_tokens = r.Int32("loss_chunk_tokens");
  t.kernels = static_cast<SpecKernels>(r.Enum("kernels", kKernelsNames));
  JsonObjectReader d(r.Object("data"), "training.data", {"seed", "token_id_bound", "token_ids_file"});
  t.data.seed = d.UInt32("seed");
  t.data.token_id_bound = d.Int32("token_id_bound");
  t.data.token_ids_file = d.String("token_ids_file");
  t.adapter = ReadAdapter(r.Object("adapter"));
  return t;
}

SpecMemory ReadMemory(const nlohmann::json& json) {
  JsonObjectReader r(json, "memory",
                     {"device_memory_limit_bytes", "allocator", "sample_interval_ms", "record_history",
                      "snapshot_path"});
  SpecMemory m;
  m.device_memory_limit_bytes = r.Int64("device_memory_limit_bytes");
  JsonObjectReader a(r.Object("allocator"), "memory.allocator",
                     {"expandable_segments", "max_split_size_mb", "garbage_collection_threshold", "extra"});
  m.allocator.expandable_segments = a.Bool("expandable_segments");
  m.allocator.max_split_size_mb = a.Int32("max_split_size_mb");
  m.allocator.garbage_collection_threshold = a.Double("garbage_collection_threshold");
  m.allocator.extra = a.String("extra");
  m.sample_interval_ms = r.Int32("sample_interval_ms");
  m.record_history = r.Bool("record_history");
  m.snapshot_path = r.String("snapshot_path");
  return m;
}

SpecSweep ReadSweep(const nlohmann::json& json) {
  JsonObjectReader r(json, "sweep",
                     {"variable", "mode", "values", "search_min", "search_max", "search_granularity"});
  SpecSweep s;
  s.variable = static_cast<SweepVariable>(r.Enum("variable", kSweepVariableNames));
  s.mode = static_cast<SweepMode>(r.Enum("mode", kSweepModeNames));
  s.values = r.RepeatedInt32("values");
  s.search_min = r.Int32("search_min");
  s.search_max = r.Int32("search_max");
  s.search_granularity = r.Int32("search_granularity");
  return s;
}

SpecParallel ReadParallel(const nlohmann::json& json) {
  JsonObjectReader r(json, "parallel", {"world_size", "sharding", "reshard_after_forward", "prefetch"});
  SpecParallel p;
  p.world_size = r.Int32("world_size");
  p.sharding = static_cast<SpecSharding>(r.Enum("sharding", kShardingNames));
  p.reshard_after_forward = r.Bool("reshard_after_forward");
  p.prefetch = r.Has("prefetch") ? r.Bool("prefetch") : spec_rules::kDefaultPrefetch;
  return p;
}

}  // namespace

ExperimentSpec ParseExperimentSpec(const std::string& json_text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw SpecError("", std::string("spec is not valid JSON: ") + e.what());
  }
  JsonObjectReader r(root, "",
                     {"name", "model", "training", "memory", "sweep", "priority", "time_limit_seconds", "device",
                      "fault", "parallel"});
  ExperimentSpec spec;
  spec.name = r.String("name");
  spec.model = ReadModel(r.Object("model"));
  spec.training = ReadTraining(r.Object("training"));
  spec.memory = ReadMemory(r.Object("memory"));
  spec.sweep = ReadSweep(r.Object("sweep"));
  spec.parallel = ReadParallel(r.Object("parallel"));
  spec.priority = r.Enum("priority", kPriorityNames);
  spec.time_limit_seconds = r.Int32("time_limit_seconds");
  spec.device = static_cast<DeviceKind>(r.Enum("device", kDeviceNames));
  spec.fault = static_cast<Fault>(r.Enum("fault", kFaultNames));
  ApplyDefaultsAndValidate(spec);
  return spec;
}

}  // namespace vramlab::worker
