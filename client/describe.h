// Short human-readable words for the schema's enums and specs, shared by every text view so that
// `ls`, `show`, `watch` and the reports name things the same way.
#ifndef VRAMLAB_CLIENT_DESCRIBE_H_
#define VRAMLAB_CLIENT_DESCRIBE_H_

#include <string>

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// "QUEUED", "SUCCEEDED", ... ("UNKNOWN" for unspecified).
std::string StateName(vramlab::v1::Experiment::State state);
// "load", "forward", "backward", "optimizer step", "zero_grad", "setup", "teardown".
std::string PhaseName(vramlab::v1::Phase phase);
// "eager"/"sdpa", "adamw"/"adamw-fp32-master"/..., "bf16"/"fp32"/"fp16": the flag spellings.
std::string AttentionName(vramlab::v1::AttentionImpl attention);
std::string OptimizerName(vramlab::v1::OptimizerKind kind);
std::string DTypeName(vramlab::v1::DType dtype);

// The settings that tell experiments apart, in flag spelling with defaults filled in:
// "tiny mb4 acc1 seq512 eager adamw" plus only the switches that are on
// ("ckpt:all", "loss:chunked", "offload", "limit 24.00 GiB", "sweep seq_len 512..8192", ...).
std::string SpecSummary(const vramlab::v1::ExperimentSpec& spec);

// What a step time rests on: "105 ms (median of 3 steady steps)", "105 ms (one steady step)",
// "no steady step (the warm-up step took 1.2 s)"; a report stored before warm-up steps were left
// out says "105 ms (median, warm-up step included)".
std::string StepTimeSummary(double median_seconds, int steady_steps, int warmup_steps,
                            double warmup_seconds);
// tokens/s at the steady median, or "-" where there is no steady step.
std::string TokensPerSecondSummary(double tokens_per_second, int steady_steps, int warmup_steps);

// "12.3%".
std::string FormatPercent(double ratio);
// "850 ms", "12.3 s", "4m05s", "2h03m".
std::string FormatSeconds(double seconds);
// "2026-11-30 06:28:01 UTC"; "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp);
// When a queued experiment is expected to start, relative to `now`: "now", "in 12m05s";
// "held" for a held one; "-" when the daemon gave no estimate.
std::string StartEstimateText(const vramlab::v1::Experiment& experiment, absl::Time now);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_DESCRIBE_H_
