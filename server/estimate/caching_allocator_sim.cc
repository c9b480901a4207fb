#include "server/estimate/caching_allocator_sim.h"

#include <algorithm>
#include <iterator>

#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kLargePageBytes = kCudaLargeSegmentBytes;  // expandable: 20 MiB pages
constexpr int64_t kSmallPageBytes = kCudaSmallSegmentBytes;  // expandable: 2 MiB pages
constexpr int64_t kSegmentGap = int64_t{1} << 36;            // keeps segments apart

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
  const bool ok = TryCachedBlock(size, small, &address) ||
                  TryNewMemory(size, small, events, &address);
  if (!ok) return false;
  live_[id] = address;
  allocated_ += blocks_[address].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return true;
}

bool CachingAllocatorSim::TryCachedBlock(int64_t size, bool small, int64_t* address) {
  std::set<FreeKey>& pool = FreeSet(small);
  const auto it = pool.lower_bound({size, 0});
  if (it == pool.end()) return false;
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
    block.address = next_address_;
    block.segment = next_address_;
    block.size = segment;
    block.small = small;
    next_address_ += segment + kSegmentGap;
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
  const int64_t page = small ? kSmallPageBytes : kLargePageBytes;
  if (expandable_base_[index] == 0) {
    expandable_base_[index] = next_address_;
    next_address_ += kSegmentGap;
  }
  const int64_t base = expandable_base_[index];
  const int64_t end = base + expandable_mapped_[index];
  // A free block that ends where the mapping ends grows; otherwise new pages start there.
  int64_t start = end;
  if (end > base) {
    auto last = std::prev(blocks_.lower_bound(end));
    if (!last->second.live && last->second.address + last->second.size == end) {
      start = last->second.address;
    }
  }
  const int64_t grow = RoundUp(size - (end - start), page);
  if (!Fits(grow)) return false;
  if (start == end) {
    Block block;
    block.address = end;
    block.segment = base;
    block.size = 0;
    block.small = small;
    blocks_[end] = block;
  } else {
    EraseFree(blocks_[start]);
  }
  blocks_[start].size += grow;
  InsertFree(blocks_[start]);
  expandable_mapped_[index] += grow;
  reserved_ += grow;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  events->mapped.push_back(grow);
  *address = Take(start, size);
  return true;
}

bool CachingAllocatorSim::Free(int64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end()) return false;
  auto block_it = blocks_.find(it->second);
  live_.erase(it);
  Block block = block_it->second;
  allocated_ -= block.size;
  // Merge with free neighbours of the same segment.
  if (block_it != blocks_.begin()) {
    auto prev = std::prev(block_it);
    if (!prev->second.live && prev->second.segment == block.segment &&
        prev->second.address + prev->second.size == block.address) {
      EraseFree(prev->second);
      block.address = prev->second.address;
      block.size += prev->second.size;
      blocks_.erase(block_it);
      block_it = prev;
    }
  }
  auto next = std::next(block_it);
  if (next != blocks_.end() && !next->second.live && next->second.segment == block.segment &&
      block.address + block.size == next->second.address) {
    EraseFree(next->second);
    block.size += next->second.size;
    blocks_.erase(next);
  }
  block.live = false;
  block_it->second = block;
  InsertFree(block);
  return true;
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
  for (std::set<FreeKey>* pool : {&free_small_, &free_large_}) {
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
  // The mapped tail of each pool's segment that is free goes back in whole pages.
  for (int index = 0; index < 2; ++index) {
    const int64_t page = index == 0 ? kSmallPageBytes : kLargePageBytes;
    const int64_t base = expandable_base_[index];
    const int64_t end = base + expandable_mapped_[index];
    if (end == base) continue;
    auto last = std::prev(blocks_.lower_bound(end));
    Block& block = last->second;
    if (block.live || block.address + block.size != end) continue;
    const int64_t keep = RoundUp(block.address - base, page) - (block.address - base);
    const int64_t unmap = (block.size - keep) / page * page;
    if (unmap <= 0) continue;
    EraseFree(block);
    block.size -= unmap;
    expandable_mapped_[index] -= unmap;
    reserved_ -= unmap;
    events->released.push_back(unmap);
    if (block.size == 0) {
      blocks_.erase(last);
    } else {
      InsertFree(block);
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
    if (!block.live && segment_has_live[block.segment]) bytes += block.size;
  }
  return bytes;
}

}  // namespace vramlab::server::estimate
