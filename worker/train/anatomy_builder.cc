#include "worker/train/anatomy_builder.h"

#include <algorithm>

namespace vramlab::worker {

void AnatomyBuilder::ObserveReading(const MemorySample& s) {
  if (s.reserved_bytes > max_reserved_.reserved_bytes) max_reserved_ = s;
  if (s.device_used_bytes > max_device_used_.device_used_bytes) max_device_used_ = s;
  if (s.has_free_block_fragmentation) {
    worst_free_block_fragmentation_ =
        std::max(worst_free_block_fragmentation_, s.free_block_fragmentation_ratio);
  }
}

void AnatomyBuilder::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  anatomy_ = MemoryAnatomy{};
  have_weights_ = have_gradients_ = have_optimizer_state_ = false;
  in_backward_state_.reset();
  forward_begin_.reset();
  forward_peak_ = 0;
  max_reserved_ = MemorySample{};
  max_device_used_ = MemorySample{};
  worst_free_block_fragmentation_ = 0;
}

void AnatomyBuilder::OnSample(const MemorySample& sample) {
  std::lock_guard<std::mutex> lock(mu_);
  ObserveReading(sample);
}

void AnatomyBuilder::OnPhase(const PhaseMeasurement& m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ledger_ != nullptr) ledger_->ClassifyPeakIfMoved();
  ObserveReading(m.begin);
  ObserveReading(m.end);
  const int64_t growth = m.end.allocated_bytes - m.begin.allocated_bytes;
  const int64_t above_ends = std::max(m.window_peak_allocated, m.end.allocated_bytes) -
                             std::max(m.begin.allocated_bytes, m.end.allocated_bytes);
  switch (m.position.phase) {
    case Phase::kLoad:
      if (!have_weights_) {
        anatomy_.weights_bytes =
            growth - anatomy_.adapter_weights_bytes - anatomy_.quantization_constants_bytes;
      }
      have_weights_ = true;
      break;
    case Phase::kForward:
      forward_begin_ = m.begin;
      forward_peak_ = m.window_peak_allocated;
      break;
    case Phase::kBackward: {
      if (!forward_begin_) break;
      const int64_t before = forward_begin_->allocated_bytes;
      const int64_t peak =
          std::max({forward_peak_, m.window_peak_allocated, m.end.allocated_bytes});
      anatomy_.activations_bytes =
          std::max(anatomy_.activations_bytes, peak - std::max(before, m.end.allocated_bytes));
      if (!have_gradients_) {
        const int64_t persistent = m.end.allocated_bytes - before;
        anatomy_.gradients_bytes =
            std::max<int64_t>(0, persistent - in_backward_state_.value_or(0));
        if (in_backward_state_) {
          anatomy_.optimizer_state_bytes = *in_backward_state_;
          have_optimizer_state_ = true;
        }
        have_gradients_ = true;
      }
      forward_begin_.reset();
      break;
    }
    case Phase::kOptimizerStep:
      if (!have_optimizer_state_) anatomy_.optimizer_state_bytes = std::max<int64_t>(0, growth);
      have_optimizer_state_ = true;
      anatomy_.temporary_buffers_bytes = std::max(anatomy_.temporary_buffers_bytes, above_ends);
      break;
    default:
      break;
  }
}

MemoryAnatomy AnatomyBuilder::Build(const MemorySample& final_reading) {
  std::lock_guard<std::mutex> lock(mu_);
  ObserveReading(final_reading);
  MemoryAnatomy a = anatomy_;
  a.peak_allocated_bytes = final_reading.peak_allocated_bytes;
  a.peak_reserved_bytes = std::max(final_reading.peak_reserved_bytes, max_reserved_.reserved_bytes);
  a.peak_device_used_bytes = max_device_used_.device_used_bytes;
  a.allocator_cache_bytes = max_reserved_.reserved_bytes - max_reserved_.allocated_bytes;
  a.fragmentation_ratio = max_reserved_.fragmentation_ratio;
  a.cuda_context_bytes =
      std::max<int64_t>(0, max_device_used_.device_used_bytes - max_device_used_.reserved_bytes);
  a.free_block_fragmentation_ratio = worst_free_block_fragmentation_;
  if (ledger_ != nullptr) {
    ledger_->ClassifyPeakIfMoved();
    ledger_->FillPeakMoments(&a);
  }
  return a;
}

}  // namespace vramlab::worker
