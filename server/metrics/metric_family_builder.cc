#include "server/metrics/metric_family_builder.h"

namespace vramlab::server {

prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddCollected(prometheus::MetricFamily& family, const MetricLabels& labels,
                  prometheus::ClientMetric metric) {
  metric.label.clear();
  for (const auto& [name, value] : labels) metric.label.push_back({name, value});
  family.metric.push_back(std::move(metric));
}

void AddValue(prometheus::MetricFamily& family, const MetricLabels& labels, double value) {
  prometheus::ClientMetric metric;
  switch (family.type) {
    case prometheus::MetricType::Counter:
      metric.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      metric.gauge.value = value;
      break;
    default:
      metric.untyped.value = value;
      break;
  }
  AddCollected(family, labels, std::move(metric));
}

}  // namespace vramlab::server
