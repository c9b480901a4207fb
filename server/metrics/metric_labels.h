// Label values of the exporter's bounded label sets. Each function maps an enum onto a fixed,
// small set of lowercase values, so no client input can grow a label's cardinality.
#ifndef VRAMLAB_SERVER_METRICS_METRIC_LABELS_H_
#define VRAMLAB_SERVER_METRICS_METRIC_LABELS_H_

#include <string>
#include <vector>

#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// "low", "normal" or "high" (PRIORITY_UNSPECIFIED is normal, as the queue treats it).
std::string PriorityLabel(vramlab::v1::Priority priority);
// The queue priorities in the order they are exported.
const std::vector<vramlab::v1::Priority>& ExportedPriorities();

// "succeeded", "oom", "failed", "cancelled" or "interrupted"; empty for a state that is not final.
std::string OutcomeLabel(vramlab::v1::Experiment::State state);
// The final states, each exported from the start at 0 so rate() sees the first increment.
const std::vector<vramlab::v1::Experiment::State>& FinalStates();

// The `gpu` label of a slot: its index in decimal.
std::string SlotLabel(int slot);

// `value` cut to at most `max_bytes` bytes without splitting a UTF-8 sequence, so a long free-form
// experiment name cannot bloat every scrape.
std::string TruncateUtf8(const std::string& value, size_t max_bytes);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_METRIC_LABELS_H_
