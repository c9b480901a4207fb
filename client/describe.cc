#include "client/describe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/byte_size.h"
#include "common/spec/spec_rules.h"

namespace vramlab::client {

using namespace vramlab::v1;  // NOLINT: many enum values

std::string StateName(Experiment::State state) {
  if (state == Experiment::STATE_UNSPECIFIED) return "UNKNOWN";
  return Experiment::State_Name(state);
}

std::string PhaseName(Phase phase) {
  switch (phase) {
    case LOAD:
      return "load";
    case FORWARD:
      return "forward";
    case BACKWARD:
      return "backward";
    case OPTIMIZER_STEP:
      return "optimizer step";
    case ZERO_GRAD:
      return "zero_grad";
    case SETUP:
      return "setup";
    case TEARDOWN:
      return "teardown";
    default:
      return "-";
  }
}

std::string AttentionName(AttentionImpl attention) { return attention == SDPA ? "sdpa" : "eager"; }

std::string OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case ADAMW_FP32_MASTER:
      return "adamw-fp32-master";
    case SGD:
      return "sgd";
    case ADAMW_8BIT:
      return "adamw-8bit";
    default:
      return "adamw";
  }
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case FLOAT32:
      return "fp32";
    case FLOAT16:
      return "fp16";
    default:
      return "bf16";
  }
}

namespace {

int OrDefault(int value, int fallback) { return value > 0 ? value : fallback; }

std::string SweepSummary(const SweepSpec& sweep) {
  const std::string variable = sweep.variable() == MICRO_BATCH_SIZE ? "mb" : "seq";
  if (sweep.mode() == SEARCH_MAX) {
    std::string out =
        absl::StrCat("search max ", variable, " ", sweep.search_min(), "..", sweep.search_max());
    if (sweep.search_granularity() > 1) absl::StrAppend(&out, " by ", sweep.search_granularity());
    return out;
  }
  if (sweep.values_size() == 0) return "";
  if (sweep.values_size() <= 3) {
    return absl::StrCat("sweep ", variable, " ", absl::StrJoin(sweep.values(), ","));
  }
  return absl::StrCat("sweep ", variable, " ", sweep.values(0), "..",
                      sweep.values(sweep.values_size() - 1), " (", sweep.values_size(), ")");
}

// "lora r16 a32", "qlora r8 a8 q,v": the adapter's kind, rank and alpha (defaults filled), and its
// targets when they are not all seven. Empty for full fine-tuning.
std::string AdapterSummary(const AdapterSpec& adapter) {
  if (adapter.kind() != LORA && adapter.kind() != QLORA) return "";
  const int rank = OrDefault(adapter.rank(), spec_rules::kDefaultAdapterRank);
  const double alpha = adapter.alpha() > 0 ? adapter.alpha() : spec_rules::kDefaultAdapterAlpha;
  std::string out = absl::StrCat(adapter.kind() == QLORA ? "qlora" : "lora", " r", rank, " a",
                                 absl::StrFormat("%g", alpha));
  std::vector<std::string> targets;
  for (int target : adapter.target_modules()) {
    const std::string name = spec_rules::AdapterTargetShortName(target);
    if (!name.empty() && std::find(targets.begin(), targets.end(), name) == targets.end()) {
      targets.push_back(name);
    }
  }
  if (!targets.empty() && static_cast<int>(targets.size()) < spec_rules::kNumAdapterTargets) {
    absl::StrAppend(&out, " ", absl::StrJoin(targets, ","));
  }
  return out;
}

}  // namespace

std::string SpecSummary(const ExperimentSpec& spec) {
  if (spec.has_command()) {
    // The program's name and arguments, then what it is predicted as (its equivalent spec).
    const auto& argv = spec.command().argv();
    std::string program = argv.empty() ? "" : argv[0].substr(argv[0].rfind('/') + 1);
    std::vector<std::string> words = {absl::StrCat("command: ", program)};
    for (int i = 1; i < argv.size(); ++i) words.push_back(argv[i]);
    std::string text = absl::StrJoin(words, " ");
    constexpr size_t kMaxCommandSummary = 60;
    if (text.size() > kMaxCommandSummary) text = text.substr(0, kMaxCommandSummary - 3) + "...";
    if (!spec.command().has_equivalent_spec()) return text;
    ExperimentSpec equivalent = spec;
    equivalent.clear_command();
    return absl::StrCat(text, " (as ", SpecSummary(equivalent), ")");
  }
  const TrainingSpec& t = spec.training();
  std::vector<std::string> parts;
  if (!spec.model().preset().empty()) {
    parts.push_back(spec.model().preset());
  } else if (spec.model().has_config()) {
    // A config by its family ("llama L80 h8192"); an unset model_type is qwen2.
    const vramlab::v1::ModelConfig& config = spec.model().config();
    parts.push_back(absl::StrCat(config.model_type().empty() ? "qwen2" : config.model_type(), " L",
                                 config.num_hidden_layers(), " h", config.hidden_size()));
  } else if (!spec.model().weights_dir().empty()) {
    parts.push_back("weights-dir");
  }
  // A sweep replaces the field it varies: its summary (at the end) stands for it.
  const bool sweeps = !SweepSummary(spec.sweep()).empty();
  const bool sweeps_batch = sweeps && spec.sweep().variable() == MICRO_BATCH_SIZE;
  // An unset variable is the sequence length (the worker's default).
  const bool sweeps_seq = sweeps && !sweeps_batch;
  if (!sweeps_batch) {
    parts.push_back(
        absl::StrCat("mb", OrDefault(t.micro_batch_size(), spec_rules::kDefaultMicroBatchSize)));
  }
  parts.push_back(
      absl::StrCat("acc", OrDefault(t.grad_accum_steps(), spec_rules::kDefaultGradAccumSteps)));
  if (!sweeps_seq) {
    parts.push_back(absl::StrCat("seq", OrDefault(t.seq_len(), spec_rules::kDefaultSeqLen)));
  }
  if (t.dtype() == FLOAT32 || t.dtype() == FLOAT16) parts.push_back(DTypeName(t.dtype()));
  parts.push_back(AttentionName(t.attention()));
  parts.push_back(OptimizerName(t.optimizer().kind()));
  // Full fine-tuning and an adapter run of the same shapes differ here alone.
  if (const std::string adapter = AdapterSummary(t.adapter()); !adapter.empty()) {
    parts.push_back(adapter);
  }
  if (t.checkpoint_every_k_layers() == 1) parts.push_back("ckpt:all");
  if (t.checkpoint_every_k_layers() > 1) {
    parts.push_back(absl::StrCat("ckpt:every:", t.checkpoint_every_k_layers()));
  }
  if (t.loss() == CHUNKED) parts.push_back("loss:chunked");
  if (t.kernels() == FUSED) parts.push_back("kernels:fused");
  if (t.optimizer().offload_to_cpu()) parts.push_back("offload");
  if (t.optimizer().in_backward()) parts.push_back("in-backward");
  if (t.optimizer().delayed_update()) parts.push_back("delayed-update");
  const AllocatorConfig& allocator = spec.memory().allocator();
  if (allocator.expandable_segments()) parts.push_back("expandable");
  if (allocator.max_split_size_mb() > 0) {
    parts.push_back(absl::StrCat("max_split:", allocator.max_split_size_mb(), "MB"));
  }
  if (spec.memory().device_memory_limit_bytes() > 0) {
    parts.push_back(absl::StrCat("limit ", FormatBytes(spec.memory().device_memory_limit_bytes())));
  }
  const vramlab::v1::ParallelSpec& parallel = spec.parallel();
  if (parallel.world_size() >= 2) parts.push_back(absl::StrCat("ranks:", parallel.world_size()));
  if (parallel.sharding() > vramlab::v1::SHARD_NONE &&
      parallel.sharding() <= vramlab::v1::SHARD_FULL) {
    static const char* const kShort[] = {"", "", "optimizer", "gradients", "full"};
    parts.push_back(absl::StrCat(
        "shard:", kShort[parallel.sharding()], parallel.reshard_after_forward() ? "+reshard" : "",
        parallel.has_prefetch() && !parallel.prefetch() ? "+noprefetch" : ""));
  }
  if (spec.has_sweep()) {
    const std::string sweep = SweepSummary(spec.sweep());
    if (!sweep.empty()) parts.push_back(sweep);
  }
  return absl::StrJoin(parts, " ");
}

std::string StepTimeSummary(double median_seconds, int steady_steps, int warmup_steps,
                            double warmup_seconds) {
  if (steady_steps == 0 && warmup_steps == 0) {
    if (median_seconds <= 0) return "-";
    return absl::StrCat(FormatSeconds(median_seconds), " (median, warm-up step included)");
  }
  if (steady_steps == 0) {
    return absl::StrCat("no steady step (the warm-up step took ", FormatSeconds(warmup_seconds),
                        ")");
  }
  if (steady_steps == 1) return absl::StrCat(FormatSeconds(median_seconds), " (one steady step)");
  return absl::StrCat(FormatSeconds(median_seconds), " (median of ", steady_steps,
                      " steady steps)");
}

std::string TokensPerSecondSummary(double tokens_per_second, int steady_steps, int warmup_steps) {
  if (steady_steps == 0 && (warmup_steps > 0 || tokens_per_second <= 0)) return "-";
  return absl::StrFormat("%.0f", tokens_per_second);
}

std::string FormatPercent(double ratio) { return absl::StrFormat("%.1f%%", ratio * 100.0); }

std::string FormatSeconds(double seconds) {
  if (seconds < 1.0) return absl::StrFormat("%.0f ms", seconds * 1000.0);
  if (seconds < 60.0) return absl::StrFormat("%.1f s", seconds);
  const int64_t whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 3600) return absl::StrFormat("%dm%02ds", whole / 60, whole % 60);
  return absl::StrFormat("%dh%02dm", whole / 3600, (whole % 3600) / 60);
}

std::string StartEstimateText(const vramlab::v1::Experiment& experiment, absl::Time now) {
  if (experiment.held()) return "held";
  if (!experiment.has_estimated_start_time()) return "-";
  const absl::Time start = absl::FromUnixSeconds(experiment.estimated_start_time().seconds());
  const double seconds = absl::ToDoubleSeconds(start - now);
  return seconds < 1.0 ? "now" : absl::StrCat("in ", FormatSeconds(seconds));
}

std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(timestamp.seconds()),
                          absl::UTCTimeZone());
}

}  // namespace vramlab::client
