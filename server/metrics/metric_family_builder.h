// Small helpers that assemble prometheus-cpp MetricFamily values by hand, for a Collectable that
// snapshots its own state under one lock instead of keeping prometheus-cpp metric objects.
#ifndef VRAMLAB_SERVER_METRICS_METRIC_FAMILY_BUILDER_H_
#define VRAMLAB_SERVER_METRICS_METRIC_FAMILY_BUILDER_H_

#include <string>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"

namespace vramlab::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                    prometheus::MetricType type);

// Appends one series (labels, value) to a gauge or counter family.
void AddValue(prometheus::MetricFamily& family, const MetricLabels& labels, double value);

// Appends an already collected series (e.g. prometheus::Histogram::Collect()) with `labels`.
void AddCollected(prometheus::MetricFamily& family, const MetricLabels& labels,
                  prometheus::ClientMetric metric);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_METRIC_FAMILY_BUILDER_H_
