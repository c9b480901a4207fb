#include "server/estimate/reserved_model.h"

#include <algorithm>
#include <cmath>

#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {
namespace {

using vramlab::v1::Phase;

// Fragmentation per moment, in units of the moment's cycled block: the most reserved-but-
// unallocated memory an out-of-memory message reported in that kind of moment, over the block,
// rounded up to the next tenth (docs/ESTIMATOR.md, "Does it fit", lists every such OOM).
// Native allocator:
//   decoder layers: 4.17 GiB over a 65,536-token MLP intermediate of 1.09 GiB = 3.82 -> 3.9
//   loss: 4.36 GiB over the fp32 logits of 8,192 tokens, 4.64 GiB = 0.94 -> 1.0
//   optimizer step: 0.62 GiB (23.98 reserved - 23.36 allocated) over 1,024 tokens' fp32
//     logits, 0.58 GiB = 1.07 -> 1.1
// Expandable segments (free pages are unmapped before an OOM; what stays is partial pages and
// the small pool): 307 MiB over a 69,632-token MLP intermediate of 1,190 MiB = 0.26 -> 0.3,
// applied to every moment.
constexpr double kNativeLayerBlocks = 3.9;
constexpr double kNativeLossBlocks = 1.0;
constexpr double kNativeStepBlocks = 1.1;
constexpr double kExpandableBlocks = 0.3;

double FragmentationBlocks(AllocatorKind allocator, Moment moment) {
  if (moment == Moment::kLoad) return 0.0;
  switch (allocator) {
    case AllocatorKind::kCounting:
      return 0.0;
    case AllocatorKind::kExpandable:
      return kExpandableBlocks;
    case AllocatorKind::kNative:
      switch (moment) {
        case Moment::kLoss:
          return kNativeLossBlocks;
        case Moment::kOptimizerStep:
          return kNativeStepBlocks;
        default:
          return kNativeLayerBlocks;
      }
  }
  return 0.0;
}

int64_t RoundUp(int64_t value, int64_t unit) { return (value + unit - 1) / unit * unit; }

int64_t Multiple(double blocks, int64_t block) {
  return static_cast<int64_t>(std::ceil(blocks * static_cast<double>(block)));
}

}  // namespace

AllocatorKind AllocatorOf(const RunSettings& run, bool expandable_segments) {
  if (run.device == Device::kCpu) return AllocatorKind::kCounting;
  return expandable_segments ? AllocatorKind::kExpandable : AllocatorKind::kNative;
}

int64_t RoundedReserved(AllocatorKind allocator, int64_t allocated) {
  switch (allocator) {
    case AllocatorKind::kCounting:
      return allocated;
    case AllocatorKind::kNative:
      // The large pool's segments are rounded to 2 MiB; the small pool holds at least one 2 MiB
      // segment once any tensor of 1 MiB or less exists (every run has some).
      return SegmentBytes(allocated) + kCudaSmallSegmentBytes;
    case AllocatorKind::kExpandable:
      // One growing segment per pool, mapped in 20 MiB pages (large) and 2 MiB pages (small).
      return RoundUp(allocated, kCudaLargeSegmentBytes) + kCudaSmallSegmentBytes;
  }
  return allocated;
}

int64_t LargestLossTensor(const RunSettings& run) {
  const int64_t rows =
      run.chunked_loss ? std::min(run.tokens(), run.loss_chunk_tokens) : run.tokens();
  return rows * run.model.vocab_size * 4;
}

int64_t LargestLayerTensor(const RunSettings& run) {
  const ModelShape& m = run.model;
  const int64_t t = run.tokens();
  int64_t largest = std::max(t * m.intermediate_size * run.dtype_bytes, t * m.hidden_size * 4);
  if (run.eager_attention) {
    largest = std::max(largest, run.micro_batch * m.num_heads * run.seq_len * run.seq_len * 4);
  }
  return largest;
}

std::vector<MomentReserved> PredictReserved(const RunSettings& run, const StepPeaks& peaks,
                                            AllocatorKind allocator) {
  const int64_t loss_block = LargestLossTensor(run);
  const int64_t layer_block = LargestLayerTensor(run);
  struct Row {
    Moment moment;
    Phase phase;
    int64_t allocated;
    int64_t cycled_block;
  };
  std::vector<Row> rows = {
      {Moment::kLoad, vramlab::v1::LOAD, peaks.load, 0},
      {Moment::kForwardLayers, vramlab::v1::FORWARD, peaks.forward_layers, layer_block},
      {Moment::kLoss, vramlab::v1::FORWARD, peaks.forward_loss, loss_block},
      {Moment::kLoss, vramlab::v1::BACKWARD, peaks.backward_loss, loss_block},
      {Moment::kBackwardLayers, vramlab::v1::BACKWARD, peaks.backward_layers, layer_block},
  };
  if (!run.in_backward) {
    // The update's allocations (state in the first step, temporaries) meet the cache backward
    // left; offloaded state and temporaries live in host memory, so nothing new is placed.
    rows.push_back({Moment::kOptimizerStep, vramlab::v1::OPTIMIZER_STEP, peaks.optimizer_step,
                    run.offload_to_cpu ? 0 : std::max(loss_block, layer_block)});
  }
  std::vector<MomentReserved> out;
  for (const Row& row : rows) {
    if (row.allocated <= 0) continue;
    MomentReserved m;
    m.moment = row.moment;
    m.phase = row.phase;
    m.allocated = row.allocated;
    m.low = RoundedReserved(allocator, row.allocated);
    m.cycled_block = row.cycled_block;
    m.fragmentation = Multiple(FragmentationBlocks(allocator, row.moment), row.cycled_block);
    out.push_back(m);
  }
  return out;
}

}  // namespace vramlab::server::estimate
