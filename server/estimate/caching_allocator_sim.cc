#include "server/estimate/caching_allocator_sim.h"

#include <algorithm>
#include <iterator>

#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kLargePageBytes = kCudaLargeSegmentBytes;  // expandable: 20 MiB pages
constexpr int64_t kSmallPageBytes = kCudaSmallSegmentBytes;  // expandable: 2 MiB pages
constexpr int64_t kSegmentGap = int64_t{1} << 36;            // keeps segments apart
// Address space an expandable segment reserves (c10 reserves the card's size; any size larger
// than what a trace maps behaves the same).
constexpr int64_t kExpandableVirtualBytes = int64_t{1} << 44;

int64_t RoundUp(int64_t value, int64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

CachingAllocatorSim::CachingAllocatorSim(AllocatorSimConfig config) : config_(config) {
  if (config_.max_split_size <= 0) config_.max_split_size = std::numeric_limits<int64_t>::max();
}

int64_t CachingAllocatorSim::RoundSize(int64_t bytes) {
  return bytes < kCudaMinBlockBytes ? kCudaMinBlockBytes : RoundUp(bytes, kCudaMinBlockBytes);
}

int64_t CachingAllocatorSim::SegmentSize(int64_t rounded) { return SegmentBytes(rounded); }

bool CachingAllocatorSim::Fits(int64_t reserve) const {
  return config_.limit <= 0 || reserved_ + reserve <= config_.limit;
}

void CachingAllocatorSim::InsertFree(const Block& block) {
  FreeSet(block.small).insert({block.size, block.address});
}

void CachingAllocatorSim::EraseFree(const Block& block) {
  FreeSet(block.small).erase({block.size, block.address});
}

bool CachingAllocatorSim::Malloc(int64_t id, int64_t bytes, SegmentEvents* events) {
  if (live_.count(id) != 0) return false;
  const int64_t size = RoundSize(bytes);
  const bool small = size <= kCudaSmallRequestBytes;
  int64_t address = 0;
  if (config_.garbage_collection_threshold > 0 && config_.limit > 0) GarbageCollect(events);
  const bool ok =
      TryCachedBlock(size, small, &address) || TryNewMemory(size, small, events, &address);
  if (!ok) return false;
  live_[id] = address;
  allocated_ += blocks_[address].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return true;
}

int64_t CachingAllocatorSim::ExpandableSize(int64_t address) const {
  const Block& block = blocks_.at(address);
  const auto next = blocks_.upper_bound(address);
  const bool unmapped_after =
      next != blocks_.end() && next->second.segment == block.segment && !next->second.mapped;
  return block.size + (unmapped_after ? next->second.size : 0);
}

bool CachingAllocatorSim::TryCachedBlock(int64_t size, bool small, int64_t* address) {
  std::set<FreeKey>& pool = FreeSet(small);
  auto it = pool.lower_bound({size, 0});
  if (it == pool.end()) return false;
  if (config_.expandable_segments) {
    // c10 ranks a free block that ends where the segment's unmapped pages begin by the size it
    // could grow to, not its mapped size: best fit walks on past it to the larger blocks that
    // are smaller than that, so growing the segment's tail is the last resort.
    for (auto next = std::next(it);
         next != pool.end() && ExpandableSize(next->second) < ExpandableSize(it->second); ++next) {
      it = next;
    }
  }
  const int64_t found = it->first;
  // Oversize blocks (>= max_split_size) serve only large requests that nearly fill them.
  if (size < config_.max_split_size && found >= config_.max_split_size) return false;
  if (size >= config_.max_split_size && found >= size + kCudaLargeSegmentBytes) return false;
  *address = Take(it->second, size);
  return true;
}

int64_t CachingAllocatorSim::Take(int64_t address, int64_t size) {
  Block& block = blocks_[address];
  EraseFree(block);
  const int64_t remaining = block.size - size;
  const bool split = (block.small || config_.expandable_segments)
                         ? remaining >= kCudaMinBlockBytes
                         : size < config_.max_split_size && remaining > kCudaSmallRequestBytes;
  if (split) {
    Block rest = block;
    rest.address = address + size;
    rest.size = remaining;
    blocks_[rest.address] = rest;
    InsertFree(rest);
    block.size = size;
  }
  block.live = true;
  return address;
}

bool CachingAllocatorSim::TryNewMemory(int64_t size, bool small, SegmentEvents* events,
                                       int64_t* address) {
  auto attempt = [&]() {
    // The limit is checked against the segment a cudaMalloc would take, also when expandable
    // segments then map only the pages needed.
    const int64_t segment = SegmentSize(size);
    if (!Fits(segment)) return false;
    if (config_.expandable_segments) return TryExpand(size, small, events, address);
    Block block;
    if (queued_segment_addresses_.empty()) {
      if (config_.segment_placement == SegmentPlacement::kBelowEarlier) {
        next_segment_top_ -= segment + kSegmentGap;
        block.address = next_segment_top_;
      } else {
        block.address = next_segment_bottom_;
        next_segment_bottom_ += segment + kSegmentGap;
      }
    } else {
      block.address = queued_segment_addresses_.front();
      queued_segment_addresses_.pop_front();
    }
    block.segment = block.address;
    block.size = segment;
    block.small = small;
    blocks_[block.address] = block;
    segments_[block.address] = segment;
    reserved_ += segment;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    events->mapped.push_back(segment);
    InsertFree(block);
    *address = Take(block.address, size);
    return true;
  };
  if (attempt()) return true;
  if (config_.expandable_segments) {
    UnmapFreePages(events);
    return attempt();
  }
  ReleaseOversize(size, events);
  if (attempt()) return true;
  ReleaseWholeSegments(events);
  return attempt();
}

bool CachingAllocatorSim::TryExpand(int64_t size, bool small, SegmentEvents* events,
                                    int64_t* address) {
  const int index = small ? 0 : 1;
  if (expandable_base_[index] == 0) {
    // The segment reserves address space far beyond any card; all of it starts unmapped.
    Block whole;
    whole.address = whole.segment = next_address_;
    whole.size = kExpandableVirtualBytes;
    whole.small = small;
    whole.mapped = false;
    blocks_[whole.address] = whole;
    expandable_base_[index] = whole.address;
    next_address_ += kExpandableVirtualBytes + kSegmentGap;
  }
  const int64_t base = expandable_base_[index];
  const int64_t page = small ? kSmallPageBytes : kLargePageBytes;
  // The lowest unmapped block that, with a free block right before it and the free or unmapped
  // blocks after it, spans the request (c10's find_expandable_block).
  int64_t candidate = -1;
  for (auto it = blocks_.lower_bound(base); it != blocks_.end() && it->second.segment == base;
       ++it) {
    if (it->second.mapped || it->second.live) continue;
    auto start = it;
    if (start != blocks_.begin()) {
      auto prev = std::prev(start);
      if (prev->second.segment == base && !prev->second.live) start = prev;
    }
    int64_t span = 0;
    for (auto walk = start;
         walk != blocks_.end() && walk->second.segment == base && !walk->second.live && span < size;
         ++walk) {
      span += walk->second.size;
    }
    if (span >= size) {
      candidate = start->first;
      break;
    }
  }
  if (candidate < 0) return false;
  if (!blocks_[candidate].mapped) {
    candidate = MapBlock(candidate, std::min(blocks_[candidate].size, size), page, events);
  }
  while (blocks_[candidate].size < size) {
    const Block& free_block = blocks_[candidate];
    const int64_t next = free_block.address + free_block.size;
    candidate = MapBlock(next, std::min(size - free_block.size, blocks_[next].size), page, events);
  }
  *address = Take(candidate, size);
  return true;
}

int64_t CachingAllocatorSim::MapBlock(int64_t address, int64_t bytes, int64_t page,
                                      SegmentEvents* events) {
  Block& block = blocks_[address];
  const int64_t mapped = std::min(RoundUp(bytes, page), block.size);
  if (mapped < block.size) {
    Block rest = block;
    rest.address = address + mapped;
    rest.size = block.size - mapped;
    blocks_[rest.address] = rest;  // stays unmapped
    block.size = mapped;
  }
  block.mapped = true;
  reserved_ += mapped;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  events->mapped.push_back(mapped);
  return MergeFree(address);
}

int64_t CachingAllocatorSim::MergeFree(int64_t address) {
  auto block_it = blocks_.find(address);
  Block block = block_it->second;
  EraseFree(block);
  auto joins = [&](const Block& other) {
    return !other.live && other.mapped == block.mapped && other.segment == block.segment;
  };
  if (block_it != blocks_.begin()) {
    auto prev = std::prev(block_it);
    if (joins(prev->second) && prev->second.address + prev->second.size == block.address) {
      if (prev->second.mapped) EraseFree(prev->second);
      block.address = prev->second.address;
      block.size += prev->second.size;
      blocks_.erase(block_it);
      block_it = prev;
    }
  }
  auto next = std::next(block_it);
  if (next != blocks_.end() && joins(next->second) &&
      block.address + block.size == next->second.address) {
    if (next->second.mapped) EraseFree(next->second);
    block.size += next->second.size;
    blocks_.erase(next);
  }
  block_it->second = block;
  if (block.mapped) InsertFree(block);
  return block.address;
}

bool CachingAllocatorSim::Free(int64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end()) return false;
  Block& block = blocks_[it->second];
  live_.erase(it);
  allocated_ -= block.size;
  block.live = false;
  const int64_t merged = MergeFree(block.address);
  blocks_[merged].freed_at = ++frees_;
  return true;
}

void CachingAllocatorSim::GarbageCollect(SegmentEvents* events) {
  const auto target = static_cast<int64_t>(config_.garbage_collection_threshold *
                                           static_cast<double>(config_.limit));
  if (reserved_ <= target || config_.expandable_segments) return;
  // Whole free segments of the large pool, the longest free first.
  std::vector<std::pair<int64_t, int64_t>> candidates;  // (freed_at, address)
  for (const FreeKey& key : free_large_) {
    const Block& block = blocks_[key.second];
    const auto segment = segments_.find(block.segment);
    if (block.address == block.segment && segment != segments_.end() &&
        segment->second == block.size) {
      candidates.push_back({block.freed_at, block.address});
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [age, address] : candidates) {
    if (reserved_ <= target) break;
    const Block block = blocks_[address];
    EraseFree(block);
    segments_.erase(address);
    blocks_.erase(address);
    reserved_ -= block.size;
    events->released.push_back(block.size);
  }
}

void CachingAllocatorSim::ReleaseOversize(int64_t size, SegmentEvents* events) {
  if (config_.max_split_size == std::numeric_limits<int64_t>::max()) return;
  // Oversize blocks are never split, so a free one is a whole segment. The smallest that holds
  // max(size, max_split_size) goes back; without one, the largest go back until that much has.
  const int64_t target = std::max(size, config_.max_split_size);
  auto release = [&](std::set<FreeKey>::iterator it) {
    const FreeKey key = *it;
    free_large_.erase(it);
    blocks_.erase(key.second);
    segments_.erase(key.second);
    reserved_ -= key.first;
    events->released.push_back(key.first);
    return key.first;
  };
  const auto it = free_large_.lower_bound({target, 0});
  if (it != free_large_.end()) {
    release(it);
    return;
  }
  int64_t released = 0;
  while (released < target && !free_large_.empty() &&
         std::prev(free_large_.end())->first >= config_.max_split_size) {
    released += release(std::prev(free_large_.end()));
  }
}

void CachingAllocatorSim::ReleaseWholeSegments(SegmentEvents* events) {
  for (std::set<FreeKey>* pool : {&free_large_, &free_small_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      const Block& block = blocks_[it->second];
      const auto segment = segments_.find(block.segment);
      if (block.address != block.segment || segment == segments_.end() ||
          segment->second != block.size) {
        ++it;
        continue;
      }
      reserved_ -= block.size;
      events->released.push_back(block.size);
      segments_.erase(segment);
      blocks_.erase(block.address);
      it = pool->erase(it);
    }
  }
}

void CachingAllocatorSim::UnmapFreePages(SegmentEvents* events) {
  // Every free block of an expandable segment gives back the whole pages inside it (large pool
  // first, then small, each by size then address, as c10's release_blocks walks them).
  for (std::set<FreeKey>* pool : {&free_large_, &free_small_}) {
    const std::vector<FreeKey> free(pool->begin(), pool->end());
    for (const FreeKey& key : free) {
      const Block block = blocks_[key.second];
      const int64_t base = block.segment;
      const int64_t page = block.small ? kSmallPageBytes : kLargePageBytes;
      const int64_t lo = base + RoundUp(block.address - base, page);
      const int64_t hi = base + (block.address + block.size - base) / page * page;
      if (hi <= lo) continue;
      EraseFree(block);
      if (lo > block.address) {
        blocks_[block.address].size = lo - block.address;  // stays mapped and free
        InsertFree(blocks_[block.address]);
      }
      if (block.address + block.size > hi) {
        Block after = block;
        after.address = hi;
        after.size = block.address + block.size - hi;
        blocks_[hi] = after;
        InsertFree(after);
      }
      Block hole = block;
      hole.address = lo;
      hole.size = hi - lo;
      hole.mapped = false;
      blocks_[lo] = hole;
      reserved_ -= hole.size;
      events->released.push_back(hole.size);
      MergeFree(lo);
    }
  }
}

void CachingAllocatorSim::EmptyCache(SegmentEvents* events) {
  if (config_.expandable_segments) {
    UnmapFreePages(events);
  } else {
    ReleaseWholeSegments(events);
  }
}

int64_t CachingAllocatorSim::inactive_split() const {
  std::map<int64_t, bool> segment_has_live;
  for (const auto& [address, block] : blocks_) {
    segment_has_live[block.segment] = segment_has_live[block.segment] || block.live;
  }
  int64_t bytes = 0;
  for (const auto& [address, block] : blocks_) {
    if (!block.live && block.mapped && segment_has_live[block.segment]) bytes += block.size;
  }
  return bytes;
}

}  // namespace vramlab::server::estimate
