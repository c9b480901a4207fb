// A replay of c10's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) for one device
// and one stream: the rules that decide reserved memory, written from the allocator's source.
//   - sizes are rounded up to 512 B (kMinBlockSize); requests up to 1 MiB (kSmallSize) use the
//     small pool, larger ones the large pool;
//   - a request takes the smallest cached free block of its pool that holds it (best fit, lower
//     address first); a block at least max_split_size is not handed to a smaller request, nor
//     one 20 MiB (kLargeBuffer) or more larger than a request at least max_split_size;
//   - a block is split when the rest is >= 512 B (small pool, and expandable segments) or
//     > 1 MiB (large pool, only for requests under max_split_size);
//   - without a fitting block a segment is cudaMalloc'd: 2 MiB (kSmallBuffer) for requests up to
//     1 MiB, 20 MiB (kLargeBuffer) under 10 MiB (kMinLargeAlloc), else rounded up to 2 MiB
//     (kRoundLarge);
//   - when that would pass the limit (setMemoryFraction), free blocks at least max_split_size
//     are released first (largest that suffice), then every free block that is a whole
//     segment, and the cudaMalloc is tried again; then the request fails (out of memory);
//   - freed blocks merge with free neighbours of the same segment;
//   - garbage_collection_threshold t under a limit L: before a request is served while reserved
//     exceeds t * L, free blocks that are whole segments go back, the longest free first, until
//     reserved is at most t * L (c10 frees those free at least as long as the average, again
//     until the target is met: the same order);
//   - expandable segments: one segment per pool reserves address space and maps pages (20 MiB
//     large, 2 MiB small) on demand: a request no free block holds maps the lowest unmapped
//     range that, joined with the free block before it, spans it; before failing (and on
//     empty_cache) every free block unmaps the whole pages inside it. Not modelled: c10's
//     preference, among free blocks of equal fit, for one followed by unmapped space.
// Used by the unit tests on allocator traces (testdata/estimator/traces/) and by the estimator,
// which replays its predicted allocations through it (reserved_replay.h); it needs no trace.
#ifndef VRAMLAB_SERVER_ESTIMATE_CACHING_ALLOCATOR_SIM_H_
#define VRAMLAB_SERVER_ESTIMATE_CACHING_ALLOCATOR_SIM_H_

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace vramlab::server::estimate {

// Where a new cudaMalloc'd segment (not an expandable page) lies relative to the earlier ones.
// Best fit breaks ties between equal free blocks by address, so the order decides which of them
// a request takes and which stay cached. The driver mostly hands a new segment addresses below
// the earlier ones (the recorded traces: 148 of 152 large segments); a run of segments can also
// land above them, and a run the replay reads low can then measure as the other order replays
// it (docs/ESTIMATOR.md, "Reserved by replay").
enum class SegmentPlacement {
  kBelowEarlier,  // ties go to the newest segment
  kAboveEarlier,  // ties go to the oldest segment
};

struct AllocatorSimConfig {
  int64_t limit = 0;  // bytes the allocator may reserve; 0: no limit
  bool expandable_segments = false;
  int64_t max_split_size = std::numeric_limits<int64_t>::max();
  // garbage_collection_threshold (0: off; in (0, 1)); acts only under a limit, as c10's needs
  // a memory fraction.
  double garbage_collection_threshold = 0;
  SegmentPlacement segment_placement = SegmentPlacement::kBelowEarlier;
};

// What one Malloc did to the device: segments (or expandable pages) mapped and released.
struct SegmentEvents {
  std::vector<int64_t> mapped;
  std::vector<int64_t> released;
};

class CachingAllocatorSim {
 public:
  explicit CachingAllocatorSim(AllocatorSimConfig config);

  // Allocates `bytes` for tensor `id` (unique while live). False: out of memory (the cache was
  // released first, as the allocator does; `events` says what that did).
  bool Malloc(int64_t id, int64_t bytes, SegmentEvents* events);
  // Frees tensor `id`; false if it is not live.
  bool Free(int64_t id);
  // torch.cuda.empty_cache(): releases every whole free segment (free pages when expandable).
  void EmptyCache(SegmentEvents* events);

  int64_t allocated() const { return allocated_; }
  int64_t reserved() const { return reserved_; }
  int64_t peak_allocated() const { return peak_allocated_; }
  int64_t peak_reserved() const { return peak_reserved_; }
  // Free bytes inside segments that also hold live blocks (c10's inactive_split_bytes).
  int64_t inactive_split() const;

  // Replaying a recorded trace: the next segment a cudaMalloc maps (not an expandable page) is at
  // `address`. Best fit breaks ties between equal free blocks by address, so a replay must place
  // segments where the device did to choose as c10 chose; without them each new segment lies
  // below the earlier ones, as the device mostly places them. Addresses queue in order.
  void QueueSegmentAddress(int64_t address) { queued_segment_addresses_.push_back(address); }

  static int64_t RoundSize(int64_t bytes);
  static int64_t SegmentSize(int64_t rounded);

 private:
  struct Block {
    int64_t address = 0;
    int64_t size = 0;
    int64_t segment = 0;  // address of the segment's first byte
    bool small = false;
    bool live = false;
    bool mapped = true;    // false: expandable address space with no memory behind it
    int64_t freed_at = 0;  // Free() count when it last became free (garbage collection's age)
  };
  using FreeKey = std::pair<int64_t, int64_t>;  // (size, address): best fit, lower address first

  bool TryCachedBlock(int64_t size, bool small, int64_t* address);
  // Expandable segments: block `address`'s size plus the unmapped pages right after it.
  int64_t ExpandableSize(int64_t address) const;
  bool TryNewMemory(int64_t size, bool small, SegmentEvents* events, int64_t* address);
  bool TryExpand(int64_t size, bool small, SegmentEvents* events, int64_t* address);
  void ReleaseOversize(int64_t size, SegmentEvents* events);
  void ReleaseWholeSegments(SegmentEvents* events);
  void GarbageCollect(SegmentEvents* events);
  void UnmapFreePages(SegmentEvents* events);
  // Maps the first `bytes` (rounded up to pages) of unmapped block `address`; merges it with
  // free neighbours; returns the merged free block's address.
  int64_t MapBlock(int64_t address, int64_t bytes, int64_t page, SegmentEvents* events);
  // Merges block `address` (free) with free neighbours of its segment in the same mapped
  // state; returns the merged block's address (in the free sets when mapped).
  int64_t MergeFree(int64_t address);
  int64_t Take(int64_t address, int64_t size);  // splits per the rules; returns block address
  void InsertFree(const Block& block);
  void EraseFree(const Block& block);
  std::set<FreeKey>& FreeSet(bool small) { return small ? free_small_ : free_large_; }
  bool Fits(int64_t reserve) const;

  AllocatorSimConfig config_;
  std::map<int64_t, Block> blocks_;      // by address; every block of every segment
  std::map<int64_t, int64_t> segments_;  // cudaMalloc'd segments: address -> size
  std::set<FreeKey> free_small_, free_large_;
  absl::flat_hash_map<int64_t, int64_t> live_;  // tensor id -> block address
  // Expandable: each pool's segment (small, large) start; 0 until first used.
  int64_t expandable_base_[2] = {0, 0};
  int64_t next_address_ = int64_t{1} << 40;         // expandable reservations, growing up
  int64_t next_segment_top_ = int64_t{1} << 62;     // cudaMalloc'd segments, growing down
  int64_t next_segment_bottom_ = int64_t{1} << 61;  // or growing up (kAboveEarlier)
  std::deque<int64_t> queued_segment_addresses_;
  int64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  int64_t frees_ = 0;
};

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_CACHING_ALLOCATOR_SIM_H_
