#include "server/estimate/fit_verdict.h"

#include <cmath>

namespace vramlab::server::estimate {
namespace {

// The estimator's measured error on the peak allocated over the recorded H200 runs that fit
// (testdata/estimator/fit_calibration.jsonl; (predicted - measured) / predicted), each bound
// rounded up to the next half percent:
//   every run: at most 0.95 % short (fp32-master AdamW offloaded)            -> under 1.0 %
//   fused attention, full fine-tuning: at most 0.56 % over                    -> over 1.0 %
//   8-bit AdamW in backward (fused attention): +1.85 % ... +3.08 %            -> over 3.5 %
//   eager attention or an adapter: at most 4.35 % over (LoRA, eager, mb 4)    -> over 4.5 %
// On the CPU the estimate-vs-worker test allows 6 % either way.
constexpr double kCudaUnder = 0.01;
constexpr double kCudaOverFused = 0.01;
constexpr double kCudaOver8bitInBackward = 0.035;
constexpr double kCudaOverEagerOrAdapter = 0.045;
constexpr double kCpuError = 0.06;

int64_t Scaled(int64_t bytes, double ratio) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(bytes) * ratio));
}

}  // namespace

ModelError MeasuredModelError(const RunSettings& run, AllocatorKind allocator) {
  if (allocator == AllocatorKind::kCounting) return {kCpuError, kCpuError};
  if (run.eager_attention || run.adapter.enabled()) return {kCudaUnder, kCudaOverEagerOrAdapter};
  if (run.in_backward && run.optimizer == vramlab::v1::ADAMW_8BIT) {
    return {kCudaUnder, kCudaOver8bitInBackward};
  }
  return {kCudaUnder, kCudaOverFused};
}

FitDecision DecideFit(const std::vector<MomentReserved>& moments, const ModelError& error,
                      int64_t limit) {
  FitDecision d;
  const MomentReserved* top_high = nullptr;
  const MomentReserved* top_floor = nullptr;
  int64_t best_high = -1, best_floor = -1;
  for (const MomentReserved& m : moments) {
    const int64_t high = m.low + m.fragmentation + Scaled(m.allocated, error.under);
    const int64_t floor = m.low - Scaled(m.low, error.over);
    if (high > best_high) best_high = high, top_high = &m;
    if (floor > best_floor) best_floor = floor, top_floor = &m;
  }
  if (top_high == nullptr) return d;
  const bool ruled_out = limit > 0 && best_floor > limit;
  const MomentReserved& m = ruled_out ? *top_floor : *top_high;
  d.deciding_phase = m.phase;
  d.reserved_low = m.low;
  d.reserved_high = m.low + m.fragmentation + Scaled(m.allocated, error.under);
  d.margin = d.reserved_high - (m.low - Scaled(m.low, error.over));
  if (limit <= 0) return d;
  if (ruled_out) {
    d.verdict = vramlab::v1::DOES_NOT_FIT;
  } else if (best_high <= limit) {
    d.verdict = vramlab::v1::FITS;
  } else {
    d.verdict = vramlab::v1::TIGHT;
  }
  return d;
}

}  // namespace vramlab::server::estimate
