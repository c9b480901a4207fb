// The worker's side of vramlab.v1.WorkerEvent (proto/vramlab/v1/memory.proto), as plain structs.
// Field names and meanings are the proto's; event_json.h turns them into canonical JSON.
#ifndef VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_
#define VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::worker {

// The proto's enums, generated (schema/plain_proto.py): the JSON writer names them from there.
using Phase = plain::Phase;
using PhaseEdge = plain::PhaseEdge;
using DeviceKind = plain::DeviceKind;
using ErrorKind = plain::WorkerError_Kind;
using NoticeLevel = plain::Notice_Level;

// Where the training loop is; stamped on samples, phase events and OOM reports.
struct LoopPosition {
  Phase phase = Phase::kUnspecified;
  int32_t step = 0;
  int32_t micro_step = 0;
  int32_t sweep_index = 0;
};

// Live bytes by category (proto CategoryBytes); see worker/memory/allocation_ledger.h.
struct CategoryBytes {
  int64_t weights_bytes = 0;
  int64_t adapter_weights_bytes = 0;
  int64_t quantization_constants_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t temporaries_bytes = 0;
};

struct MemorySample {
  double time_seconds = 0;
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t active_bytes = 0;
  int64_t inactive_split_bytes = 0;
  int64_t requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t alloc_retries = 0;
  int64_t oom_count = 0;
  int64_t device_used_bytes = 0;
  int64_t device_total_bytes = 0;
  double fragmentation_ratio = 0;
  double free_block_fragmentation_ratio = 0;
  bool has_free_block_fragmentation = false;
  int64_t largest_free_block_bytes = 0;
  LoopPosition position;
  // Live bytes by category as attributed so far (only where the allocator reports to a ledger).
  bool has_categories = false;
  CategoryBytes categories;
};

struct PhaseEvent {
  Phase phase = Phase::kUnspecified;
  PhaseEdge edge = PhaseEdge::kUnspecified;
  LoopPosition position;  // phase mirrors `phase`
  MemorySample memory;
};

struct StepResult {
  int32_t step = 0;
  int32_t sweep_index = 0;
  double loss = 0;
  double step_time_seconds = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};

// The moment allocated memory peaked: what was alive then; categories sum to allocated_bytes.
struct PeakAllocatedMoment {
  bool known = false;
  int64_t allocated_bytes = 0;
  CategoryBytes categories;
  LoopPosition position;
};

// The moment reserved memory peaked, with allocated read at the same moment.
struct PeakReservedMoment {
  bool known = false;
  int64_t reserved_bytes = 0;
  int64_t allocated_bytes = 0;
  LoopPosition position;
};

// Fields as in proto/vramlab/v1/memory.proto's MemoryAnatomy.
struct MemoryAnatomy {
  int64_t weights_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t temporary_buffers_bytes = 0;
  int64_t allocator_cache_bytes = 0;
  int64_t cuda_context_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t peak_device_used_bytes = 0;
  double fragmentation_ratio = 0;
  double free_block_fragmentation_ratio = 0;
  int64_t adapter_weights_bytes = 0;
  int64_t quantization_constants_bytes = 0;
  // SHARD_FULL: the largest total of all-gathered full parameters alive at once, and of the
  // staging buffers of its collectives (worker/parallel/full_shard.h); 0 otherwise.
  int64_t gathered_parameters_bytes = 0;
  int64_t communication_buffers_bytes = 0;
  PeakAllocatedMoment at_peak_allocated;
  PeakReservedMoment at_peak_reserved;
};

struct OomReport {
  LoopPosition position;
  int64_t requested_bytes = 0;
  int64_t free_bytes = 0;
  std::string message;
  MemorySample memory;
};

struct SweepPointResult {
  int32_t sweep_index = 0;
  int32_t value = 0;
  bool oom = false;
  MemoryAnatomy anatomy;
  double step_time_seconds = 0;
  double tokens_per_second = 0;
  double final_loss = 0;
  double mfu = 0;
  std::string attention_backend;
  int32_t steady_steps = 0;
  int32_t warmup_steps = 0;
  double warmup_step_time_seconds = 0;
};

struct FinalReport {
  MemoryAnatomy anatomy;
  std::vector<SweepPointResult> sweep_points;
  int32_t largest_fitting_value = 0;
  int64_t parameter_count = 0;
  std::string attention_backend;
  std::string device_name;
  bool snapshot_written = false;
  double sampler_overhead_ratio = 0;
  double median_step_time_seconds = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  double final_loss = 0;
  int32_t steady_steps = 0;
  int32_t warmup_steps = 0;
  double warmup_step_time_seconds = 0;
};

struct WorkerStarted {
  std::string worker_version;
  std::string torch_version;
  DeviceKind device = DeviceKind::kUnspecified;
  std::string device_name;
  int64_t device_total_bytes = 0;
  int64_t parameter_count = 0;
  int32_t pid = 0;
};

struct WorkerError {
  ErrorKind kind = ErrorKind::kUnspecified;
  std::string message;
  std::string field;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_
