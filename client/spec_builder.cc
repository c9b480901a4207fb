#include "client/spec_builder.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/byte_size.h"
#include "client/file_io.h"
#include "client/flag_values.h"
#include "client/model_config_file.h"
#include "client/suggest.h"
#include "common/spec/model_presets.h"
#include "common/spec/spec_rules.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace vramlab::client {
namespace {

using vramlab::v1::AllocatorConfig;
using vramlab::v1::ExperimentSpec;

// Collects the text-format parser's first complaint with its position.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Reads "MIN:MAX" or "MIN:MAX:GRANULARITY" for --search-max-*.
absl::Status ApplySearch(absl::string_view flag, absl::string_view text,
                         vramlab::v1::SweepSpec& sweep) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": expected MIN:MAX or MIN:MAX:GRANULARITY (e.g. 512:32768:512), got \"", text,
        "\""));
  };
  if (parts.size() < 2 || parts.size() > 3) return invalid();
  int32_t numbers[3] = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtoi(parts[i], &numbers[i]) || numbers[i] <= 0) return invalid();
  }
  if (numbers[0] > numbers[1]) return invalid();
  sweep.set_mode(vramlab::v1::SEARCH_MAX);
  sweep.clear_values();
  sweep.set_search_min(numbers[0]);
  sweep.set_search_max(numbers[1]);
  sweep.set_search_granularity(numbers[2]);
  return absl::OkStatus();
}

absl::Status ApplyCheckpointing(absl::string_view text, vramlab::v1::TrainingSpec& training) {
  const std::string lowered = absl::AsciiStrToLower(text);
  if (lowered == "none" || lowered == "off") {
    training.set_checkpoint_every_k_layers(0);
    return absl::OkStatus();
  }
  if (lowered == "all" || lowered == "on") {
    training.set_checkpoint_every_k_layers(1);
    return absl::OkStatus();
  }
  absl::string_view rest = lowered;
  if (absl::ConsumePrefix(&rest, "every:")) {
    ASSIGN_OR_RETURN(int32_t k, ParseIntFlag("checkpointing every:K", rest, 1, 1 << 16));
    training.set_checkpoint_every_k_layers(k);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--checkpointing: expected none, all or every:K, got \"", text, "\""));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const spec_rules::ModelPreset& preset : spec_rules::ModelPresets()) {
    names.push_back(preset.name);
  }
  return names;
}

// --preset and --model-config each give the model's shapes: either replaces the shapes a --spec
// file gave (a spec's config would otherwise silently win over a --preset), and both together
// are refused rather than one ignored.
absl::Status ApplyModelFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  auto& model = *spec.mutable_model();
  if (args.Has("preset") && args.Has("model-config")) {
    return absl::InvalidArgumentError(
        "--model-config and --preset both give the model's shapes; pass one (--model-config FILE "
        "for a config.json of any size, --preset NAME for a published model)");
  }
  if (auto v = args.Get("preset")) {
    if (spec_rules::FindModelPreset(*v) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--preset: unknown model preset \"", *v, "\"",
                                                     DidYouMean(*v, PresetNames()),
                                                     "; 'vramlab presets' lists them all"));
    }
    model.set_preset(*v);
    model.clear_config();
  }
  if (auto v = args.Get("model-config")) {
    ASSIGN_OR_RETURN(*model.mutable_config(), ReadModelConfigFile(*v));
    model.clear_preset();
  }
  if (auto v = args.Get("weights-dir")) model.set_weights_dir(*v);
  if (auto v = args.Get("init-seed")) {
    ASSIGN_OR_RETURN(int32_t seed, ParseIntFlag("init-seed", *v, 0, INT32_MAX));
    model.set_init_seed(static_cast<uint32_t>(seed));
  }
  return absl::OkStatus();
}

// Reads --lora / --qlora: "r=16,alpha=32,dropout=0.05,targets=q,k,v,o,dtype=fp32" (every key
// optional; "targets" takes the following items without "=" as well: all, q, k, v, o, gate, up,
// down or the module names q_proj ...). "default" alone keeps PEFT's defaults.
absl::Status ApplyAdapter(absl::string_view flag, absl::string_view text,
                          vramlab::v1::AdapterKind kind, vramlab::v1::AdapterSpec& adapter) {
  adapter.Clear();
  adapter.set_kind(kind);
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lowered.empty() || lowered == "default") return absl::OkStatus();
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": ", why, " (expected e.g. r=16,alpha=32,dropout=0.05,targets=all)"));
  };
  std::string key;
  for (absl::string_view item : absl::StrSplit(lowered, ',')) {
    std::string value;
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      if (key != "targets") return invalid(absl::StrCat("\"", item, "\" is not key=value"));
      value = std::string(item);
    } else {
      key = std::string(item.substr(0, eq));
      value = std::string(item.substr(eq + 1));
    }
    if (key == "r" || key == "rank") {
      ASSIGN_OR_RETURN(int32_t rank, ParseIntFlag(absl::StrCat(flag, " r"), value, 1, INT32_MAX));
      adapter.set_rank(rank);
    } else if (key == "alpha") {
      ASSIGN_OR_RETURN(double alpha, ParseDoubleFlag(absl::StrCat(flag, " alpha"), value));
      if (!(alpha > 0)) return invalid(absl::StrCat("alpha must be > 0, got ", value));
      adapter.set_alpha(alpha);
    } else if (key == "dropout") {
      ASSIGN_OR_RETURN(double dropout, ParseDoubleFlag(absl::StrCat(flag, " dropout"), value));
      if (!(dropout >= 0 && dropout < 1))
        return invalid(absl::StrCat("dropout must be in [0, 1), got ", value));
      adapter.set_dropout(dropout);
    } else if (key == "dtype") {
      ASSIGN_OR_RETURN(int choice, ParseChoiceFlag(absl::StrCat(flag, " dtype"), value,
                                                   {"bf16", "fp32", "fp16"}));
      adapter.set_dtype(static_cast<vramlab::v1::DType>(choice + 1));
    } else if (key == "targets") {
      if (value == "all") {
        adapter.clear_target_modules();  // empty means all seven
        continue;
      }
      int target = 0;
      for (int t = 1; t <= spec_rules::kNumAdapterTargets; ++t) {
        if (value == spec_rules::AdapterTargetShortName(t) ||
            value == spec_rules::AdapterTargetModuleName(t)) {
          target = t;
        }
      }
      if (target == 0) {
        return invalid(
            absl::StrCat("unknown target \"", value, "\" (all, q, k, v, o, gate, up, down)"));
      }
      adapter.add_target_modules(static_cast<vramlab::v1::AdapterTarget>(target));
    } else {
      return invalid(absl::StrCat("unknown key \"", key, "\" (r, alpha, dropout, targets, dtype)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyTrainingFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  auto& training = *spec.mutable_training();
  constexpr int32_t kMax = INT32_MAX;
  if (auto v = args.Get("micro-batch")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("micro-batch", *v, 1, kMax));
    training.set_micro_batch_size(n);
  }
  if (auto v = args.Get("accum")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("accum", *v, 1, kMax));
    training.set_grad_accum_steps(n);
  }
  if (auto v = args.Get("seq-len")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("seq-len", *v, 1, kMax));
    training.set_seq_len(n);
  }
  if (auto v = args.Get("steps")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("steps", *v, 1, kMax));
    training.set_steps(n);
  }
  if (auto v = args.Get("dtype")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("dtype", *v, {"bf16", "fp32", "fp16"}));
    training.set_dtype(static_cast<vramlab::v1::DType>(choice + 1));
  }
  if (auto v = args.Get("attention")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("attention", *v, {"eager", "sdpa"}));
    training.set_attention(static_cast<vramlab::v1::AttentionImpl>(choice + 1));
  }
  if (auto v = args.Get("checkpointing")) RETURN_IF_ERROR(ApplyCheckpointing(*v, training));
  if (auto v = args.Get("loss")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("loss", *v, {"full", "chunked"}));
    training.set_loss(static_cast<vramlab::v1::LossImpl>(choice + 1));
  }
  if (auto v = args.Get("loss-chunk")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("loss-chunk", *v, 1, kMax));
    training.set_loss_chunk_tokens(n);
  }
  if (auto v = args.Get("kernels")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("kernels", *v, {"aten", "fused"}));
    training.set_kernels(static_cast<vramlab::v1::KernelsImpl>(choice + 1));
  }
  if (auto v = args.Get("data-seed")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("data-seed", *v, 0, kMax));
    training.mutable_data()->set_seed(static_cast<uint32_t>(n));
  }
  auto& optimizer = *training.mutable_optimizer();
  if (auto v = args.Get("optimizer")) {
    ASSIGN_OR_RETURN(
        int choice,
        ParseChoiceFlag("optimizer", *v, {"adamw", "adamw-fp32-master", "sgd", "adamw-8bit"}));
    optimizer.set_kind(static_cast<vramlab::v1::OptimizerKind>(choice + 1));
  }
  if (auto v = args.Get("lr")) {
    ASSIGN_OR_RETURN(double lr, ParseDoubleFlag("lr", *v));
    optimizer.set_learning_rate(lr);
  }
  if (args.Has("offload")) optimizer.set_offload_to_cpu(args.GetBool("offload"));
  if (args.Has("optimizer-in-backward")) {
    optimizer.set_in_backward(args.GetBool("optimizer-in-backward"));
  }
  if (args.Has("delayed-update")) optimizer.set_delayed_update(args.GetBool("delayed-update"));
  if (args.Has("lora") && args.Has("qlora")) {
    return absl::InvalidArgumentError("--lora and --qlora exclude each other");
  }
  if (auto v = args.Get("lora")) {
    RETURN_IF_ERROR(ApplyAdapter("lora", *v, vramlab::v1::LORA, *training.mutable_adapter()));
  }
  if (auto v = args.Get("qlora")) {
    RETURN_IF_ERROR(ApplyAdapter("qlora", *v, vramlab::v1::QLORA, *training.mutable_adapter()));
  }
  return absl::OkStatus();
}

absl::Status ApplyMemoryFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  auto& memory = *spec.mutable_memory();
  if (auto v = args.Get("memory-limit")) {
    auto bytes = ParseByteSize(*v);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--memory-limit: ", bytes.status().message()));
    }
    memory.set_device_memory_limit_bytes(*bytes);
  }
  if (auto v = args.Get("alloc-conf"))
    RETURN_IF_ERROR(ApplyAllocConf(*v, *memory.mutable_allocator()));
  if (auto v = args.Get("sample-interval")) {
    ASSIGN_OR_RETURN(absl::Duration interval, ParseDurationFlag("sample-interval", *v));
    // Plain numbers mean milliseconds here (the proto's unit), unlike other durations.
    int64_t ms = 0;
    memory.set_sample_interval_ms(absl::SimpleAtoi(*v, &ms)
                                      ? static_cast<int32_t>(ms)
                                      : static_cast<int32_t>(absl::ToInt64Milliseconds(interval)));
  }
  if (args.Has("record-history")) memory.set_record_history(args.GetBool("record-history"));
  return absl::OkStatus();
}

absl::Status ApplySweepFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  int given = 0;
  for (const char* flag :
       {"sweep-seq-lens", "sweep-batches", "search-max-seq", "search-max-batch"}) {
    given += args.Has(flag) ? 1 : 0;
  }
  if (given > 1) {
    return absl::InvalidArgumentError(
        "--sweep-seq-lens, --sweep-batches, --search-max-seq and --search-max-batch exclude each "
        "other");
  }
  auto& sweep = *spec.mutable_sweep();
  for (const auto& [flag, variable] : {std::pair{"sweep-seq-lens", vramlab::v1::SEQ_LEN},
                                       std::pair{"sweep-batches", vramlab::v1::MICRO_BATCH_SIZE}}) {
    if (auto v = args.Get(flag)) {
      ASSIGN_OR_RETURN(std::vector<int32_t> values, ParseIntListFlag(flag, *v));
      sweep.Clear();
      sweep.set_variable(variable);
      sweep.set_mode(vramlab::v1::LIST);
      for (int32_t value : values) sweep.add_values(value);
    }
  }
  for (const auto& [flag, variable] :
       {std::pair{"search-max-seq", vramlab::v1::SEQ_LEN},
        std::pair{"search-max-batch", vramlab::v1::MICRO_BATCH_SIZE}}) {
    if (auto v = args.Get(flag)) {
      sweep.Clear();
      sweep.set_variable(variable);
      RETURN_IF_ERROR(ApplySearch(flag, *v, sweep));
    }
  }
  if (args.Has("plain-bisection")) {
    if (sweep.mode() != vramlab::v1::SEARCH_MAX) {
      return absl::InvalidArgumentError(
          "--plain-bisection: needs a SEARCH_MAX sweep (--search-max-seq or --search-max-batch)");
    }
    sweep.set_plain_bisection(args.GetBool("plain-bisection"));
  }
  if (spec.sweep().ByteSizeLong() == 0) spec.clear_sweep();
  return absl::OkStatus();
}

absl::Status ApplyParallelFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  auto& parallel = *spec.mutable_parallel();
  if (auto v = args.Get("world-size")) {
    ASSIGN_OR_RETURN(int32_t n, ParseIntFlag("world-size", *v, 1,
                                             static_cast<int32_t>(spec_rules::kWorldSize.max)));
    parallel.set_world_size(n);
  }
  if (auto v = args.Get("sharding")) {
    ASSIGN_OR_RETURN(int choice,
                     ParseChoiceFlag("sharding", *v, {"none", "optimizer", "gradients", "full"}));
    parallel.set_sharding(static_cast<vramlab::v1::Sharding>(choice + 1));
  }
  if (args.Has("reshard-after-forward")) {
    parallel.set_reshard_after_forward(args.GetBool("reshard-after-forward"));
  }
  if (args.Has("prefetch")) parallel.set_prefetch(args.GetBool("prefetch"));
  if (spec.parallel().ByteSizeLong() == 0) spec.clear_parallel();
  return absl::OkStatus();
}

absl::Status ApplyRunFlags(const ParsedArgs& args, ExperimentSpec& spec) {
  if (auto v = args.Get("name")) spec.set_name(*v);
  if (auto v = args.Get("priority")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("priority", *v, {"low", "normal", "high"}));
    spec.set_priority(static_cast<vramlab::v1::Priority>(choice + 1));
  }
  if (auto v = args.Get("time-limit")) {
    ASSIGN_OR_RETURN(absl::Duration limit, ParseDurationFlag("time-limit", *v));
    const int64_t seconds = absl::ToInt64Seconds(limit);
    if (seconds > INT32_MAX) return absl::InvalidArgumentError("--time-limit: too long");
    spec.set_time_limit_seconds(static_cast<int32_t>(seconds));
  }
  return absl::OkStatus();
}

}  // namespace

void AddSpecFlags(FlagSet& flags) {
  flags.Value("spec", "FILE", "start from this spec (protobuf text or JSON; - for stdin)")
      .Value("name", "NAME", "label shown in lists and dashboards")
      .Value("preset", "MODEL", spec_rules::ModelPresetNames())
      .Completes(PresetNames())
      .Value("model-config", "FILE",
             "HF config.json on this host giving the model's shapes (any size of a supported "
             "family; not with --preset)")
      .Value("weights-dir", "DIR", "HF snapshot directory on the daemon's host (else random init)")
      .Value("init-seed", "N", "seed of the random init")
      .Value("micro-batch", "N", "micro-batch size")
      .Value("accum", "N", "gradient accumulation steps")
      .Value("seq-len", "N", "sequence length in tokens")
      .Value("steps", "N", "optimizer steps")
      .Value("dtype", "T", "bf16|fp32|fp16")
      .Value("attention", "IMPL", "eager|sdpa")
      .Value("checkpointing", "MODE", "activation checkpointing: none|all|every:K")
      .Value("optimizer", "KIND", "adamw|adamw-fp32-master|sgd|adamw-8bit")
      .Value("lr", "X", "learning rate (default 1e-5)")
      .Bool("offload", "keep optimizer state in pinned host memory")
      .Bool("optimizer-in-backward", "update each parameter as its gradient completes")
      .Bool("delayed-update",
            "with --offload: apply each host step one step late, overlapping the next step")
      .Value("lora", "K=V,...",
             "train LoRA adapters only: "
             "r=8,alpha=8,dropout=0,targets=all|q,k,v,o,gate,up,down,dtype=fp32 (or default)")
      .Value("qlora", "K=V,...", "as --lora, over NF4-quantised base weights (bf16/fp16 compute)")
      .Value("loss", "IMPL", "full|chunked")
      .Value("loss-chunk", "N", "tokens per chunk with --loss chunked")
      .Value("kernels", "IMPL", "aten|fused (fused: vramlab's CUDA kernels, docs/KERNELS.md)")
      .Value("data-seed", "N", "seed of the synthetic token ids")
      .Value("memory-limit", "SIZE", "emulated device memory, e.g. 24GiB")
      .Value("alloc-conf", "K:V,...", "allocator settings, e.g. expandable_segments:True")
      .Value("sample-interval", "MS", "memory sampling interval (ms, or e.g. 5ms)")
      .Bool("record-history", "record allocator history for the memory viewer")
      .Value("sweep-seq-lens", "LIST", "run these sequence lengths in order, stop at first OOM")
      .Value("sweep-batches", "LIST", "run these micro-batch sizes in order, stop at first OOM")
      .Value("search-max-seq", "MIN:MAX[:G]", "bisect for the longest sequence that fits")
      .Value("search-max-batch", "MIN:MAX[:G]", "bisect for the largest micro-batch that fits")
      .Bool("plain-bisection",
            "with --search-max-*: bisect the whole range, not from the estimate's predicted "
            "boundary (docs/ESTIMATOR.md)")
      .Value("world-size", "N", "data-parallel ranks, one GPU each (docs/PARALLEL.md)")
      .Value("sharding", "MODE",
             "none|optimizer|gradients|full (ZeRO-1/2/3; needs --world-size >= 2)")
      .Bool("reshard-after-forward",
            "with --sharding full: free each layer's gathered parameters after its forward")
      .Bool(
          "prefetch",
          "with --sharding full: gather the next layer while one runs and overlap reduce-scatters "
          "(the default; --prefetch=false waits for each collective)")
      .Value("priority", "P", "low|normal|high")
      .Value("time-limit", "DURATION", "wall-clock limit, e.g. 30m");
}

absl::StatusOr<ExperimentSpec> ParseSpecText(absl::string_view text, absl::string_view origin) {
  ExperimentSpec spec;
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (absl::StartsWith(trimmed, "{")) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(text.data(), text.size()), &spec, options);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": not a valid ExperimentSpec in JSON: ", status.message().ToString()));
    }
    return spec;
  }
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not a valid ExperimentSpec in protobuf text format: ", errors.first()));
  }
  return spec;
}

absl::StatusOr<ExperimentSpec> LoadSpecFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(path));
  return ParseSpecText(text, path == "-" ? "stdin" : path);
}

absl::StatusOr<ExperimentSpec> BuildSpec(const ParsedArgs& args) {
  ExperimentSpec spec;
  if (auto path = args.Get("spec")) {
    ASSIGN_OR_RETURN(spec, LoadSpecFile(*path));
  }
  RETURN_IF_ERROR(ApplyModelFlags(args, spec));
  RETURN_IF_ERROR(ApplyTrainingFlags(args, spec));
  RETURN_IF_ERROR(ApplyMemoryFlags(args, spec));
  RETURN_IF_ERROR(ApplySweepFlags(args, spec));
  RETURN_IF_ERROR(ApplyParallelFlags(args, spec));
  RETURN_IF_ERROR(ApplyRunFlags(args, spec));
  return spec;
}

absl::Status ApplyAllocConf(absl::string_view text, AllocatorConfig& config) {
  std::vector<std::string> extra;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits(':', 1));
    if (kv.size() != 2 || absl::StripAsciiWhitespace(kv[0]).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--alloc-conf: expected key:value items, got \"", item, "\""));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    const absl::string_view value = absl::StripAsciiWhitespace(kv[1]);
    if (key == "expandable_segments") {
      const std::string lowered = absl::AsciiStrToLower(value);
      if (lowered != "true" && lowered != "false") {
        return absl::InvalidArgumentError(absl::StrCat(
            "--alloc-conf: expandable_segments must be True or False, got \"", value, "\""));
      }
      config.set_expandable_segments(lowered == "true");
    } else if (key == "max_split_size_mb") {
      ASSIGN_OR_RETURN(int32_t mb,
                       ParseIntFlag("alloc-conf max_split_size_mb", value, 1, INT32_MAX));
      config.set_max_split_size_mb(mb);
    } else if (key == "garbage_collection_threshold") {
      ASSIGN_OR_RETURN(double threshold,
                       ParseDoubleFlag("alloc-conf garbage_collection_threshold", value));
      if (threshold <= 0 || threshold >= 1) {
        return absl::InvalidArgumentError(
            "--alloc-conf: garbage_collection_threshold must be in (0, 1)");
      }
      config.set_garbage_collection_threshold(threshold);
    } else {
      extra.push_back(absl::StrCat(key, ":", value));
    }
  }
  if (!extra.empty()) config.set_extra(absl::StrJoin(extra, ","));
  return absl::OkStatus();
}

}  // namespace vramlab::client
