#include "server/estimate/adamw_8bit_allocations.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/layout/optimizer_layout.h"
#include "server/estimate/device_model.h"
#include "server/estimate/parameter_state.h"

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kInt32 = 4;
constexpr int64_t kBlock = layout::kAdamW8bitBlockElements;

class Planner8bit {
 public:
  // `maps_made`: the code maps exist (a step after the first).
  Planner8bit(const RunSettings& run, AllocationLog* log, bool maps_made)
      : run_(run), log_(log), maps_made_(maps_made) {}

  int64_t A(int64_t bytes) { return log_->A(AllocatedBytes(run_.device, bytes)); }

  // The moments' codes (one byte an element) and their fp32 block scales; fp32 moments below
  // the quantisation threshold.
  void CreateState(int64_t n, std::vector<int64_t>* state) {
    if (!layout::AdamW8bitQuantized(n)) {
      state->push_back(A(n * kFp32)), state->push_back(A(n * kFp32));
      return;
    }
    const int64_t blocks = layout::AdamW8bitBlocks(n);
    state->push_back(A(n)), state->push_back(A(n));
    state->push_back(A(blocks * kFp32)), state->push_back(A(blocks * kFp32));
  }

  // UpdateRange over r elements of a tensor of n: the parameter and gradient in fp32 (copies when
  // the dtype is narrower), both moments dequantised (their codes widened to int32 first), the
  // denominator, then each moment requantised; freed as the call returns.
  void UpdateRange(int64_t n, int64_t r, std::vector<int64_t>* state) {
    const bool upcast = run_.dtype_bytes < kFp32;
    const int64_t param32 = upcast ? A(r * kFp32) : -1;
    const int64_t grad32 = upcast ? A(r * kFp32) : -1;
    int64_t m = -1, v = -1;
    const bool quantized = layout::AdamW8bitQuantized(n);
    if (quantized) {
      if (!maps_made_) {
        // The signed and unsigned maps' values and midpoints, kept with the state.
        for (int i = 0; i < 2; ++i) {
          state->push_back(A(layout::kAdamW8bitMapEntries * kFp32));
          state->push_back(A((layout::kAdamW8bitMapEntries - 1) * kFp32));
        }
        maps_made_ = true;
      }
      m = Dequantize(r);
      v = Dequantize(r);
    }
    log_->T(AllocatedBytes(run_.device, r * kFp32));  // v.sqrt(), divided and shifted in place
    if (quantized) Quantize(r), Quantize(r);
    log_->F(v), log_->F(m), log_->F(grad32), log_->F(param32);
  }

 private:
  // codes.to(int32) and the looked-up values (the int32 copy freed at the statement's end).
  int64_t Dequantize(int64_t r) {
    const int64_t wide = A(r * kInt32);
    const int64_t values = A(r * kFp32);
    log_->F(wide);
    return values;
  }

  // QuantizeBlockwise, per group of whole blocks (and the partial one): |rows|, its per-block max
  // (|rows| freed), the zero test and the scale, then rows / scale and its searchsorted codes.
  void Quantize(int64_t r) {
    const int64_t full = r / kBlock * kBlock;
    for (const int64_t elements : {full, r - full}) {
      if (elements <= 0) continue;
      const int64_t rows = elements == full ? full / kBlock : 1;
      const int64_t magnitude = A(elements * kFp32);
      const int64_t absmax = A(rows * kFp32);
      log_->F(magnitude);
      const int64_t is_zero = A(rows);
      const int64_t scale = A(rows * kFp32);
      log_->F(is_zero);
      const int64_t normalized = A(elements * kFp32);
      const int64_t codes = A(elements * kInt32);
      log_->F(normalized), log_->F(codes);
      log_->F(scale), log_->F(absmax);
    }
  }

  const RunSettings& run_;
  AllocationLog* const log_;
  bool maps_made_;
};

}  // namespace

void PlanAdamW8bitStep(const RunSettings& run, const std::vector<int64_t>& elements,
                       bool create_state, AllocationLog* log, std::vector<int64_t>* state,
                       bool all_ranges) {
  Planner8bit planner(run, log, /*maps_made=*/!create_state);
  if (create_state) {
    for (int64_t n : elements) planner.CreateState(n, state);
  }
  // A range frees everything it makes, so once a range of one kind has run twice the allocator is
  // where the second left it (the first may map what the later ones reuse): the step lists each
  // kind (its length, quantised or not) twice at most, where a 7B model has 500 ranges.
  // adamw_8bit_allocations_test checks the replays' outcomes against the full listing.
  std::map<std::pair<int64_t, bool>, int> listed;
  for (int64_t n : elements) {
    for (int64_t begin = 0; begin < n; begin += kDeviceUpdateRangeElements) {
      const int64_t r = std::min(kDeviceUpdateRangeElements, n - begin);
      if (!all_ranges && listed[{r, layout::AdamW8bitQuantized(n)}]++ >= 2) continue;
      planner.UpdateRange(n, r, state);
    }
  }
}

}  // namespace vramlab::server::estimate
