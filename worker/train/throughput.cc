#include "worker/train/throughput.h"

#include <algorithm>

namespace vramlab::worker {

double TrainingFlopsPerToken(const DecoderConfig& config, int64_t seq_len,
                             int64_t adapter_parameters) {
  const double base_factor = adapter_parameters > 0 ? 4.0 : 6.0;
  return base_factor * static_cast<double>(config.ParameterCount()) +
         6.0 * static_cast<double>(adapter_parameters) +
         12.0 * static_cast<double>(config.num_hidden_layers) *
             static_cast<double>(config.hidden_size) * static_cast<double>(seq_len);
}

double ModelFlopsUtilization(double tokens_per_second, double flops_per_token, double peak_flops) {
  return peak_flops > 0 ? tokens_per_second * flops_per_token / peak_flops : 0.0;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  return values[middle];
}

}  // namespace vramlab::worker
