#include "server/metrics/metric_labels.h"

namespace vramlab::server {

using vramlab::v1::Experiment;
using vramlab::v1::Priority;

std::string PriorityLabel(Priority priority) {
  switch (priority) {
    case vramlab::v1::PRIORITY_LOW:
      return "low";
    case vramlab::v1::PRIORITY_HIGH:
      return "high";
    default:
      return "normal";
  }
}

const std::vector<Priority>& ExportedPriorities() {
  static const auto* const kPriorities = new std::vector<Priority>{
      vramlab::v1::PRIORITY_HIGH, vramlab::v1::PRIORITY_NORMAL, vramlab::v1::PRIORITY_LOW};
  return *kPriorities;
}

std::string OutcomeLabel(Experiment::State state) {
  switch (state) {
    case Experiment::SUCCEEDED:
      return "succeeded";
    case Experiment::OOM:
      return "oom";
    case Experiment::FAILED:
      return "failed";
    case Experiment::CANCELLED:
      return "cancelled";
    case Experiment::INTERRUPTED:
      return "interrupted";
    default:
      return "";
  }
}

const std::vector<Experiment::State>& FinalStates() {
  static const auto* const kStates =
      new std::vector<Experiment::State>{Experiment::SUCCEEDED, Experiment::OOM, Experiment::FAILED,
                                         Experiment::CANCELLED, Experiment::INTERRUPTED};
  return *kStates;
}

std::string SlotLabel(int slot) { return std::to_string(slot); }

std::string TruncateUtf8(const std::string& value, size_t max_bytes) {
  if (value.size() <= max_bytes) return value;
  size_t end = max_bytes;
  // Back up over continuation bytes (10xxxxxx) so the cut lands on a sequence boundary.
  while (end > 0 && (static_cast<unsigned char>(value[end]) & 0xC0) == 0x80) --end;
  return value.substr(0, end);
}

}  // namespace vramlab::server
