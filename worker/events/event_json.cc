#include "worker/events/event_json.h"

#include <cmath>
#include <string>

namespace vramlab::worker {
namespace {

using nlohmann::json;

// int64 fields are strings in the proto3 JSON mapping (JavaScript numbers lose precision > 2^53).
json Int64(int64_t value) { return std::to_string(value); }

json Double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// The proto's name of `value`, as protobuf's JSON printer writes it; a number no enumerator has
// never occurs (the worker sets only named values) but would be written as the 0 value's name.
template <typename E>
const char* ProtoEnumName(E value) {
  const char* name = plain::EnumName(value);
  return name != nullptr ? name : plain::EnumName(static_cast<E>(0));
}

json ToJson(const CategoryBytes& c) {
  return {
      {"weightsBytes", Int64(c.weights_bytes)},
      {"adapterWeightsBytes", Int64(c.adapter_weights_bytes)},
      {"quantizationConstantsBytes", Int64(c.quantization_constants_bytes)},
      {"gradientsBytes", Int64(c.gradients_bytes)},
      {"optimizerStateBytes", Int64(c.optimizer_state_bytes)},
      {"activationsBytes", Int64(c.activations_bytes)},
      {"temporariesBytes", Int64(c.temporaries_bytes)},
  };
}

}  // namespace

const char* PhaseName(Phase phase) { return ProtoEnumName(phase); }

json ToJson(const MemorySample& s) {
  json j = {
      {"timeSeconds", Double(s.time_seconds)},
      {"allocatedBytes", Int64(s.allocated_bytes)},
      {"reservedBytes", Int64(s.reserved_bytes)},
      {"activeBytes", Int64(s.active_bytes)},
      {"inactiveSplitBytes", Int64(s.inactive_split_bytes)},
      {"requestedBytes", Int64(s.requested_bytes)},
      {"peakAllocatedBytes", Int64(s.peak_allocated_bytes)},
      {"peakReservedBytes", Int64(s.peak_reserved_bytes)},
      {"allocRetries", Int64(s.alloc_retries)},
      {"oomCount", Int64(s.oom_count)},
      {"deviceUsedBytes", Int64(s.device_used_bytes)},
      {"deviceTotalBytes", Int64(s.device_total_bytes)},
      {"fragmentationRatio", Double(s.fragmentation_ratio)},
      {"phase", PhaseName(s.position.phase)},
      {"step", s.position.step},
      {"microStep", s.position.micro_step},
      {"sweepIndex", s.position.sweep_index},
  };
  if (s.has_free_block_fragmentation) {
    j["freeBlockFragmentationRatio"] = Double(s.free_block_fragmentation_ratio);
    j["hasFreeBlockFragmentation"] = true;
    j["largestFreeBlockBytes"] = Int64(s.largest_free_block_bytes);
  }
  if (s.has_categories) j["categories"] = ToJson(s.categories);
  return j;
}

namespace {

void AddPosition(const LoopPosition& p, json& j) {
  j["phase"] = PhaseName(p.phase);
  j["step"] = p.step;
  j["microStep"] = p.micro_step;
  j["sweepIndex"] = p.sweep_index;
}

json ToJson(const PeakAllocatedMoment& m) {
  json j = {{"allocatedBytes", Int64(m.allocated_bytes)}, {"categories", ToJson(m.categories)}};
  AddPosition(m.position, j);
  return j;
}

json ToJson(const PeakReservedMoment& m) {
  json j = {
      {"reservedBytes", Int64(m.reserved_bytes)},
      {"allocatedBytes", Int64(m.allocated_bytes)},
      {"allocatorCacheBytes", Int64(m.reserved_bytes - m.allocated_bytes)},
  };
  AddPosition(m.position, j);
  return j;
}

}  // namespace

json ToJson(const PhaseEvent& e) {
  return {
      {"phase", PhaseName(e.phase)},
      {"edge", ProtoEnumName(e.edge)},
      {"step", e.position.step},
      {"microStep", e.position.micro_step},
      {"sweepIndex", e.position.sweep_index},
      {"memory", ToJson(e.memory)},
  };
}

json ToJson(const StepResult& r) {
  return {
      {"step", r.step},
      {"sweepIndex", r.sweep_index},
      {"loss", Double(r.loss)},
      {"stepTimeSeconds", Double(r.step_time_seconds)},
      {"tokensPerSecond", Double(r.tokens_per_second)},
      {"mfu", Double(r.mfu)},
      {"peakAllocatedBytes", Int64(r.peak_allocated_bytes)},
      {"peakReservedBytes", Int64(r.peak_reserved_bytes)},
  };
}

json ToJson(const MemoryAnatomy& a) {
  json j = {
      {"weightsBytes", Int64(a.weights_bytes)},
      {"gradientsBytes", Int64(a.gradients_bytes)},
      {"optimizerStateBytes", Int64(a.optimizer_state_bytes)},
      {"activationsBytes", Int64(a.activations_bytes)},
      {"temporaryBuffersBytes", Int64(a.temporary_buffers_bytes)},
      {"allocatorCacheBytes", Int64(a.allocator_cache_bytes)},
      {"cudaContextBytes", Int64(a.cuda_context_bytes)},
      {"peakAllocatedBytes", Int64(a.peak_allocated_bytes)},
      {"peakReservedBytes", Int64(a.peak_reserved_bytes)},
      {"peakDeviceUsedBytes", Int64(a.peak_device_used_bytes)},
      {"fragmentationRatio", Double(a.fragmentation_ratio)},
      {"freeBlockFragmentationRatio", Double(a.free_block_fragmentation_ratio)},
      {"adapterWeightsBytes", Int64(a.adapter_weights_bytes)},
      {"quantizationConstantsBytes", Int64(a.quantization_constants_bytes)},
  };
  if (a.gathered_parameters_bytes > 0)
    j["gatheredParametersBytes"] = Int64(a.gathered_parameters_bytes);
  if (a.communication_buffers_bytes > 0)
    j["communicationBuffersBytes"] = Int64(a.communication_buffers_bytes);
  if (a.at_peak_allocated.known) j["atPeakAllocated"] = ToJson(a.at_peak_allocated);
  if (a.at_peak_reserved.known) j["atPeakReserved"] = ToJson(a.at_peak_reserved);
  return j;
}

json ToJson(const OomReport& o) {
  return {
      {"phase", PhaseName(o.position.phase)},
      {"step", o.position.step},
      {"microStep", o.position.micro_step},
      {"sweepIndex", o.position.sweep_index},
      {"requestedBytes", Int64(o.requested_bytes)},
      {"freeBytes", Int64(o.free_bytes)},
      {"message", o.message},
      {"memory", ToJson(o.memory)},
  };
}

json ToJson(const SweepPointResult& p) {
  return {
      {"sweepIndex", p.sweep_index},
      {"value", p.value},
      {"oom", p.oom},
      {"anatomy", ToJson(p.anatomy)},
      {"stepTimeSeconds", Double(p.step_time_seconds)},
      {"tokensPerSecond", Double(p.tokens_per_second)},
      {"finalLoss", Double(p.final_loss)},
      {"mfu", Double(p.mfu)},
      {"attentionBackend", p.attention_backend},
      {"steadySteps", p.steady_steps},
      {"warmupSteps", p.warmup_steps},
      {"warmupStepTimeSeconds", Double(p.warmup_step_time_seconds)},
  };
}

json ToJson(const FinalReport& r) {
  json points = json::array();
  for (const SweepPointResult& p : r.sweep_points) points.push_back(ToJson(p));
  return {
      {"anatomy", ToJson(r.anatomy)},
      {"sweepPoints", points},
      {"largestFittingValue", r.largest_fitting_value},
      {"parameterCount", Int64(r.parameter_count)},
      {"attentionBackend", r.attention_backend},
      {"deviceName", r.device_name},
      {"snapshotWritten", r.snapshot_written},
      {"samplerOverheadRatio", Double(r.sampler_overhead_ratio)},
      {"medianStepTimeSeconds", Double(r.median_step_time_seconds)},
      {"tokensPerSecond", Double(r.tokens_per_second)},
      {"mfu", Double(r.mfu)},
      {"finalLoss", Double(r.final_loss)},
      {"steadySteps", r.steady_steps},
      {"warmupSteps", r.warmup_steps},
      {"warmupStepTimeSeconds", Double(r.warmup_step_time_seconds)},
  };
}

json ToJson(const WorkerStarted& s) {
  return {
      {"workerVersion", s.worker_version},
      {"torchVersion", s.torch_version},
      {"device", ProtoEnumName(s.device)},
      {"deviceName", s.device_name},
      {"deviceTotalBytes", Int64(s.device_total_bytes)},
      {"parameterCount", Int64(s.parameter_count)},
      {"pid", s.pid},
  };
}

json ToJson(const WorkerError& e) {
  return {{"kind", ProtoEnumName(e.kind)}, {"message", e.message}, {"field", e.field}};
}

json NoticeJson(NoticeLevel level, const std::string& message) {
  return {{"level", ProtoEnumName(level)}, {"message", message}};
}

}  // namespace vramlab::worker
