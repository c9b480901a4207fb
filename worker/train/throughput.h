// Step-time arithmetic: tokens per second and model FLOPs utilization.
#ifndef VRAMLAB_WORKER_TRAIN_THROUGHPUT_H_
#define VRAMLAB_WORKER_TRAIN_THROUGHPUT_H_

#include <cstdint>
#include <vector>

#include "worker/model/qwen2_config.h"

namespace vramlab::worker {

// Training FLOPs per token: 6N for the matrix multiplies of forward and backward plus
// 12 * layers * hidden * seq for attention scores and values (PaLM appendix B). With adapters
// (adapter_parameters > 0) the base weights are frozen: their backward computes the input's
// gradient but no weight gradient, so the base counts 4N and the adapters 6 per parameter.
// Recomputation under checkpointing is not counted (model FLOPs, not hardware FLOPs).
double TrainingFlopsPerToken(const DecoderConfig& config, int64_t seq_len,
                             int64_t adapter_parameters = 0);

// tokens/s * FLOPs per token / peak; 0 when the peak is unknown.
double ModelFlopsUtilization(double tokens_per_second, double flops_per_token, double peak_flops);

// Median of `values` (0 for none); the upper middle for an even count.
double Median(std::vector<double> values);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_THROUGHPUT_H_
