#include "server/metrics/metrics.h"

#include "common/status_macros.h"
#include "server/metrics/prometheus_metrics.h"

namespace vramlab::server {

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen_address) {
  auto metrics = std::make_unique<PrometheusMetrics>();
  RETURN_IF_ERROR(metrics->Expose(listen_address));
  return std::unique_ptr<Metrics>(std::move(metrics));
}

std::unique_ptr<Metrics> Metrics::CreateUnexposed() {
  return std::make_unique<PrometheusMetrics>();
}

}  // namespace vramlab::server
