#include "server/estimate/estimator.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/estimate/device_model.h"
#include "server/estimate/estimate_notes.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/step_timeline.h"

namespace vramlab::server {
namespace {

using estimate::Device;
using estimate::RunSettings;

// Predicted peak of the caching allocator's reserved memory: the allocated peak plus the
// segment rounding of the request that sets it. Fragmentation beyond that is not modelled
// (docs/ESTIMATOR.md); on the CPU reserved == allocated.
int64_t ReservedAtPeak(const RunSettings& run, int64_t peak_allocated) {
  if (run.device == Device::kCpu) return peak_allocated;
  const int64_t rounded = estimate::SegmentBytes(peak_allocated);
  return rounded + estimate::kCudaSmallSegmentBytes;
}

struct Prediction {
  vramlab::v1::MemoryAnatomy anatomy;
  estimate::StepPeaks peaks;
};

Prediction Predict(const RunSettings& run) {
  const estimate::ParameterState params = estimate::EstimateParameterState(run);
  const estimate::StepPeaks peaks = estimate::WalkTrainingStep(run, params);
  Prediction p;
  p.peaks = peaks;
  vramlab::v1::MemoryAnatomy& a = p.anatomy;
  a.set_weights_bytes(params.weights - params.adapter_weights - params.quantization_constants);
  a.set_adapter_weights_bytes(params.adapter_weights);
  a.set_quantization_constants_bytes(params.quantization_constants);
  a.set_gradients_bytes(params.gradients);
  a.set_optimizer_state_bytes(params.optimizer_state);
  a.set_activations_bytes(peaks.activations);
  a.set_temporary_buffers_bytes(params.step_temporaries);  // 0 with in_backward
  const int64_t peak = peaks.peak();
  const int64_t reserved = ReservedAtPeak(run, peak);
  const int64_t context = run.device == Device::kCuda ? estimate::kCudaContextBytes : 0;
  a.set_allocator_cache_bytes(reserved - peak);
  a.set_cuda_context_bytes(context);
  a.set_peak_allocated_bytes(peak);
  a.set_peak_reserved_bytes(reserved);
  a.set_peak_device_used_bytes(reserved + context);
  a.set_fragmentation_ratio(reserved > 0 ? 1.0 - static_cast<double>(peak) / reserved : 0.0);
  return p;
}

// The limit applies to the caching allocator (setMemoryFraction / the counting allocator's cap):
// compare it with the predicted reserved peak.
bool Fits(const RunSettings& run, int64_t limit) {
  return Predict(run).anatomy.peak_reserved_bytes() <= limit;
}

// Largest value in [1, kSearchCeiling] for which `fits(value)` holds, 0 if none. `fits` is
// monotonic (more tokens never need less memory: estimator_test checks it), so doubling then
// bisecting is exact.
constexpr int64_t kSearchCeiling = int64_t{1} << 20;

template <typename FitsFn>
int32_t LargestFitting(FitsFn fits) {
  if (!fits(1)) return 0;
  int64_t good = 1, bad = 0;
  while (bad == 0) {
    const int64_t next = good * 2;
    if (next > kSearchCeiling) return static_cast<int32_t>(good);  // fits everything searched
    if (fits(next)) good = next; else bad = next;
  }
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (fits(mid)) good = mid; else bad = mid;
  }
  return static_cast<int32_t>(good);
}

// The most memory reserved but unallocated at an out-of-memory in the H200 sweeps with the
// default allocator (4.17 GiB: docs/results/README.md, longest sequence at 24 GiB). Runs whose
// peak came that close to the limit ran out or fit depending on where the free blocks lay.
constexpr int64_t kMeasuredFragmentationBytes = int64_t{42} * estimate::kGiB / 10;

// A note on what the estimate leaves out where it matters: a CUDA run under a limit with the
// default allocator. Empty otherwise.
std::string FragmentationNote(const vramlab::v1::ExperimentSpec& spec, const RunSettings& run,
                              const vramlab::v1::MemoryEstimate& estimate) {
  if (estimate.limit_bytes() == 0 || run.device != Device::kCuda ||
      spec.memory().allocator().expandable_segments()) {
    return "";
  }
  std::string note =
      "default allocator: fragmentation is not modelled; measured runs whose peak came within "
      "4.2 GiB of the limit have run out of memory with up to that much reserved but unused "
      "(H200, docs/results/README.md), and memory.allocator.expandable_segments removed it there. "
      "The largest fitting sequence and micro-batch may come out smaller than predicted";
  const int64_t headroom = estimate.limit_bytes() - estimate.anatomy().peak_reserved_bytes();
  if (estimate.fits() && headroom < kMeasuredFragmentationBytes) {
    note = absl::StrFormat("%.2f GiB to spare: ", static_cast<double>(headroom) / estimate::kGiB) +
           note;
  }
  return note;
}

}  // namespace

absl::StatusOr<vramlab::v1::MemoryEstimate> EstimateMemory(const vramlab::v1::ExperimentSpec& spec,
                                                           int64_t limit_bytes) {
  if (limit_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit_bytes: must not be negative, got ", limit_bytes));
  }
  ASSIGN_OR_RETURN(const RunSettings run, estimate::ResolveRunSettings(spec));
  const int64_t limit =
      limit_bytes != 0 ? limit_bytes : spec.memory().device_memory_limit_bytes();

  const Prediction p = Predict(run);
  vramlab::v1::MemoryEstimate out;
  *out.mutable_anatomy() = p.anatomy;
  out.set_predicted_peak_bytes(p.anatomy.peak_allocated_bytes());
  out.set_peak_phase(p.peaks.peak_phase());
  out.set_limit_bytes(limit);
  out.set_parameter_count(estimate::ParameterCount(run.model));
  if (limit == 0) {
    out.set_fits(true);
  } else {
    out.set_fits(p.anatomy.peak_reserved_bytes() <= limit);
    out.set_max_seq_len_that_fits(LargestFitting([&](int64_t seq) {
      RunSettings r = run;
      r.seq_len = seq;
      return Fits(r, limit);
    }));
    out.set_max_micro_batch_that_fits(LargestFitting([&](int64_t batch) {
      RunSettings r = run;
      r.micro_batch = batch;
      return Fits(r, limit);
    }));
  }
  for (std::string& note : estimate::EstimateNotes(run, limit)) out.add_notes(std::move(note));
  if (std::string note = FragmentationNote(spec, run, out); !note.empty()) {
    out.add_notes(std::move(note));
  }
  return out;
}

}  // namespace vramlab::server
