// Builds one sweep point's MemoryAnatomy from its phase measurements and samples.
//
// Definitions (all from allocator readings, so on the CPU they are exact byte counts):
// - weights: allocation growth over the LOAD phase, less the adapter weights and quantisation
//   constants, which LOAD also creates and which are measured on their own (Set...Bytes).
// - gradients: allocation after the first backward minus before the first forward (the inputs
//   exist at both ends). With an in-backward optimizer that growth is optimizer state (the
//   gradients are freed at once), so gradients = growth - optimizer state there.
// - optimizer state: allocation growth over the first OPTIMIZER_STEP (state is created lazily),
//   or the optimizer's own DeviceStateBytes() with an in-backward optimizer.
// - activations: the largest peak of a micro-step's forward+backward above both of its ends,
//   i.e. above max(allocation before forward, allocation after backward). Exact for every
//   micro-step that starts with its gradients allocated; for the first micro-step of a step the
//   gradients being created during backward are not subtracted until backward ends, so when the
//   peak falls in backward it may include part of them.
// - temporary buffers: the largest peak of an OPTIMIZER_STEP above both of its ends.
// - allocator cache and fragmentation_ratio: at the reading with the highest reserved bytes.
// - CUDA context: driver-view used minus reserved at the reading with the highest device use.
// These are each category's own largest value over the run ("max over run"), taken at different
// moments, so they need not add up to any one reading.
//
// With a ledger (set_ledger; allocation_ledger.h) the anatomy also holds two moments:
// - at_peak_allocated: what was alive at the allocation after which allocated peaked, by
//   category; the categories sum to that peak exactly. Classified at the end of the phase in
//   which the peak happened (after that phase's survivors were attributed), or in Build() when the
//   point ended inside a phase (an OOM).
// - at_peak_reserved: reserved and allocated at the same event, where reserved peaked.
//
// Thread-safety: OnSample() runs on the sampler thread, the rest on the training thread; a
// mutex guards the sample-derived state.
#ifndef VRAMLAB_WORKER_TRAIN_ANATOMY_BUILDER_H_
#define VRAMLAB_WORKER_TRAIN_ANATOMY_BUILDER_H_

#include <mutex>
#include <optional>

#include "worker/events/worker_events.h"
#include "worker/memory/allocation_ledger.h"
#include "worker/train/phase_tracker.h"

namespace vramlab::worker {

class AnatomyBuilder {
 public:
  // The ledger whose peak moments Build() reports; null (the default) leaves them unknown.
  void set_ledger(AllocationLedger* ledger) {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_ = ledger;
  }

  // Forgets everything: a new sweep point starts.
  void Reset();
  void OnPhase(const PhaseMeasurement& phase);
  void OnSample(const MemorySample& sample);
  // For in-backward optimizers: the optimizer's DeviceStateBytes() after the first backward.
  // Must be called before that backward's PhaseTracker::End().
  void SetInBackwardStateBytes(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    in_backward_state_ = bytes;
  }

  // With an adapter: the allocation growth of attaching the adapters (inside LOAD).
  void SetAdapterWeightsBytes(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    anatomy_.adapter_weights_bytes = bytes;
  }
  // QLoRA: the allocation of the quantisation constants (inside LOAD).
  void SetQuantizationConstantsBytes(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    anatomy_.quantization_constants_bytes = bytes;
  }

  // SHARD_FULL: the largest totals of gathered full parameters and of communication staging
  // buffers alive at once (FullShard's own counts).
  void SetShardingBuffersBytes(int64_t gathered_parameters, int64_t communication_buffers) {
    std::lock_guard<std::mutex> lock(mu_);
    // Present only where the run held such buffers (memory.proto).
    anatomy_.gathered_parameters_bytes = gathered_parameters;
    anatomy_.has_gathered_parameters_bytes = gathered_parameters > 0;
    anatomy_.communication_buffers_bytes = communication_buffers;
    anatomy_.has_communication_buffers_bytes = communication_buffers > 0;
  }

  // Final anatomy; `final_reading` carries the point's overall peaks.
  MemoryAnatomy Build(const MemorySample& final_reading);

 private:
  void ObserveReading(const MemorySample& sample);  // requires mu_

  std::mutex mu_;
  AllocationLedger* ledger_ = nullptr;
  MemoryAnatomy anatomy_;  // fields filled as phases complete
  bool have_weights_ = false;
  bool have_gradients_ = false;
  bool have_optimizer_state_ = false;
  std::optional<int64_t> in_backward_state_;
  std::optional<MemorySample> forward_begin_;  // of the micro-step in progress
  int64_t forward_peak_ = 0;
  // Guarded by mu_: readings from both threads.
  MemorySample max_reserved_;
  MemorySample max_device_used_;
  double worst_free_block_fragmentation_ = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_ANATOMY_BUILDER_H_
