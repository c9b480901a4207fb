#include "server/metrics/metrics.h"

#include "common/status_macros.h"
#include "server/metrics/prometheus_metrics.h"

namespace vramlab::server {

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const MetricsHttpOptions& options) {
  auto metrics = std::make_unique<PrometheusMetrics>();
  RETURN_IF_ERROR(metrics->Expose(options));
  return std::unique_ptr<Metrics>(std::move(metrics));
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen_address) {
  MetricsHttpOptions options;
  options.listen_address = listen_address;
  return Start(options);
}

std::unique_ptr<Metrics> Metrics::CreateUnexposed() {
  return std::make_unique<PrometheusMetrics>();
}

}  // namespace vramlab::server
