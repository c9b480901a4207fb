// Every live allocation of the device's allocator, in allocation order, so that the moment
// allocated memory peaked can be taken apart: which blocks were alive then, and what each was.
//
// The allocator reports each allocation and free with its totals after the event, one event at a
// time (DeviceBackend::AttachLedger: the counting allocator under its observer lock; the CUDA
// caching allocator from its trace callback, under its own lock, through AllocatorTraceFeed).
//
// "The moment of peak allocated" is the allocation event after which allocated reached its
// highest value since StartPoint(). It is exact: the same event stream the allocator's own peak
// statistic is computed from. The live set at that moment is kept implicitly — blocks allocated up
// to that event that are still alive, plus those freed since, which are set aside as they are
// freed — so nothing is copied when allocated climbs.
//
// What a block is (its category) is decided by the training loop at the end of the phase that
// allocated it (Attribute): the phase knows what its surviving allocations are — LOAD: weights
// (adapters and quantisation constants by address); FORWARD: activations saved for backward;
// BACKWARD: gradients (by address); OPTIMIZER_STEP: optimizer state. A block freed before its
// phase ended stays a temporary. ClassifyPeakIfMoved() sums the blocks alive at the peak moment by
// the category they have then; allocations the ledger never saw (made before it was attached) are
// the remainder, counted as temporaries, so the categories sum to the peak exactly.
//
// "The moment reserved peaks": allocated and reserved are taken together at every event; it is
// the event at which reserved stood highest and, among those, allocated was highest (the
// allocator at its fullest with its largest footprint). Its cache is reserved - allocated there.
//
// Thread-safety: thread-safe (one mutex). Cost: one hash-map insert or erase per allocator event;
// Attribute and ClassifyPeakIfMoved walk the live blocks (a few thousand for a 7B model).
#ifndef VRAMLAB_WORKER_MEMORY_ALLOCATION_LEDGER_H_
#define VRAMLAB_WORKER_MEMORY_ALLOCATION_LEDGER_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "worker/events/worker_events.h"

namespace vramlab::worker {

enum class BlockCategory : uint8_t {
  kTemporary = 0,  // not (yet) attributed: did not survive the phase that allocated it
  kWeights,
  kAdapterWeights,
  kQuantizationConstants,
  kGradients,
  kOptimizerState,
  kActivations,
};
constexpr int kBlockCategoryCount = 7;

// Bytes per category, indexed by BlockCategory.
using CategoryByteArray = std::array<int64_t, kBlockCategoryCount>;

CategoryBytes ToCategoryBytes(const CategoryByteArray& bytes);

class AllocationLedger {
 public:
  // Forgets every block and peak (before attaching it to an allocator: blocks it did not see
  // allocated must not linger).
  void Reset();

  // `allocated_after` / `reserved_after`: the allocator's totals with this event counted.
  void Allocated(uintptr_t address, int64_t bytes, int64_t allocated_after, int64_t reserved_after);
  void Freed(uintptr_t address, int64_t allocated_after, int64_t reserved_after);
  // The totals between allocations and frees (a segment reserved or released).
  void Observe(int64_t allocated, int64_t reserved);

  // Bytes of the live block at `address`; -1 when the ledger has none there.
  int64_t BlockBytes(uintptr_t address);
  // The highest allocated seen since StartPoint().
  int64_t peak_allocated();

  // A sweep point starts: both peaks restart from the current totals.
  void StartPoint();
  // Stamped on the peak moments (the loop position when they happened).
  void SetPosition(const LoopPosition& position);

  // A mark between events: blocks allocated later have a higher sequence number.
  uint64_t Mark();
  // Every still-unattributed live block allocated after `since` becomes `known[its address]` when
  // listed there, else `survivors`.
  void Attribute(uint64_t since, BlockCategory survivors,
                 const std::unordered_map<uintptr_t, BlockCategory>& known);

  // Live bytes by category now (what is not attributed yet, or unseen, under kTemporary).
  CategoryByteArray LiveBytes();

  // When allocated has peaked anew since the last call, sums the blocks alive at the peak moment by
  // their present category and keeps the result; true when it did. Call after Attribute() for the
  // phase that just ended, so that the phase's survivors have their category.
  bool ClassifyPeakIfMoved();
  // The last classification (all zero before one).
  PeakAllocatedMoment allocated_peak();
  PeakReservedMoment reserved_peak();
  // Sets the anatomy's at_peak_allocated and at_peak_reserved to the moments above, each present
  // once known (a classification since the point started; any reading).
  void FillPeakMoments(MemoryAnatomy* anatomy);

 private:
  struct Block {
    int64_t bytes = 0;
    uint64_t sequence = 0;
    BlockCategory category = BlockCategory::kTemporary;
  };

  void ObserveLocked(int64_t allocated, int64_t reserved);  // requires mu_

  std::mutex mu_;
  std::unordered_map<uintptr_t, Block> live_;  // guarded by mu_
  CategoryByteArray live_bytes_{};             // guarded by mu_: live_ summed by category
  uint64_t sequence_ = 0;                      // guarded by mu_: of the latest allocation
  int64_t allocated_ = 0;  // guarded by mu_: the allocator's, after the latest event
  int64_t reserved_ = 0;   // guarded by mu_
  LoopPosition position_;  // guarded by mu_

  // The allocated peak moment (guarded by mu_).
  int64_t peak_allocated_ = 0;
  uint64_t peak_sequence_ = 0;
  LoopPosition peak_position_;
  std::vector<Block> freed_since_peak_;  // alive at the peak, freed since
  bool peak_moved_ = false;
  PeakAllocatedMoment classified_;
  bool classified_known_ = false;

  PeakReservedMoment reserved_peak_;  // guarded by mu_
  bool reserved_peak_known_ = false;  // guarded by mu_
};

// The process's ledger. An allocator hook may outlive any one owner (a CUDA trace tracker cannot
// be detached), so the ledger it reports to lives as long as the process.
AllocationLedger& ProcessLedger();

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_ALLOCATION_LEDGER_H_
