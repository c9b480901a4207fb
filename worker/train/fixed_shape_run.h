// One measured training run at fixed shapes: a single experiment, or one point of a sweep.
//
// Builds the model (LOAD), runs `steps` optimizer steps of `grad_accum_steps` micro-batches each
// (FORWARD, BACKWARD per micro-batch; OPTIMIZER_STEP and ZERO_GRAD per step), emits phase and
// step events, and frees everything again (TEARDOWN: model, optimizer state, allocator cache),
// so that the next point starts from an empty allocator. An out-of-memory error anywhere is
// caught, reported as an `oom` event and returned as the outcome; any other error propagates.
#ifndef VRAMLAB_WORKER_TRAIN_FIXED_SHAPE_RUN_H_
#define VRAMLAB_WORKER_TRAIN_FIXED_SHAPE_RUN_H_

#include <functional>
#include <string>
#include <vector>

#include "worker/events/event_sink.h"
#include "worker/events/worker_events.h"
#include "worker/memory/device_backend.h"
#include "worker/memory/memory_monitor.h"
#include "worker/model/qwen2_config.h"
#include "worker/parallel/data_parallel.h"
#include "worker/spec/experiment_spec.h"
#include "worker/train/anatomy_builder.h"

namespace vramlab::worker {

// What a run at fixed shapes needs from the process around it; all pointers outlive the run.
struct WorkerContext {
  EventSink* sink = nullptr;
  DeviceBackend* backend = nullptr;
  MemoryMonitor* monitor = nullptr;
  // Shared with the sampler thread, which feeds it samples (it is thread-safe).
  AnatomyBuilder* anatomy = nullptr;
  // Called after an OOM was reported, while the point's model and optimizer still exist (the
  // moment an allocator snapshot shows what filled the memory). May be empty.
  std::function<void()> on_oom;
  // Non-empty: the first point's last step is recorded by kernel into this file
  // (kernel_profile.h); a profile that cannot be made is a warning notice, never a failure.
  std::string kernel_profile_path;
  // Set in a parallel run: this rank's side of data parallel (data_parallel.h). The point trains
  // on its rows of each global micro-batch and reports the mean loss over the ranks.
  DataParallel* parallel = nullptr;
  // Non-empty: the first point's parameters after its last step are written here (safetensors).
  std::string save_parameters_path;
};

struct FixedShape {
  int32_t seq_len = 0;
  int32_t micro_batch_size = 0;
  int32_t sweep_index = 0;
};

struct FixedShapeOutcome {
  bool oom = false;
  OomReport oom_report;   // when oom
  MemoryAnatomy anatomy;  // of the part that ran
  std::vector<StepResult> steps;
  // Median of the steady steps (all but the first, the warm-up); 0 without one.
  double median_step_time_seconds = 0;
  double tokens_per_second = 0;  // at the median step time
  int32_t steady_steps = 0;
  int32_t warmup_steps = 0;
  double warmup_step_time_seconds = 0;
  double mfu = 0;
  double final_loss = 0;
  std::string attention_backend;
};

// Runs `spec` once at `shape` (a single run, or one point of a sweep). `config` is the resolved
// model shape (ResolveModelConfig).
FixedShapeOutcome RunAtFixedShape(const ExperimentSpec& spec, const DecoderConfig& config,
                                  const FixedShape& shape, const WorkerContext& context);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_FIXED_SHAPE_RUN_H_
