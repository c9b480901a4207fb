#include "worker/memory/allocation_ledger.h"

namespace vramlab::worker {
namespace {

int64_t& Of(CategoryByteArray& bytes, BlockCategory category) {
  return bytes[static_cast<size_t>(category)];
}

}  // namespace

CategoryBytes ToCategoryBytes(const CategoryByteArray& bytes) {
  auto at = [&](BlockCategory c) { return bytes[static_cast<size_t>(c)]; };
  CategoryBytes out;
  out.weights_bytes = at(BlockCategory::kWeights);
  out.adapter_weights_bytes = at(BlockCategory::kAdapterWeights);
  out.quantization_constants_bytes = at(BlockCategory::kQuantizationConstants);
  out.gradients_bytes = at(BlockCategory::kGradients);
  out.optimizer_state_bytes = at(BlockCategory::kOptimizerState);
  out.activations_bytes = at(BlockCategory::kActivations);
  out.temporaries_bytes = at(BlockCategory::kTemporary);
  return out;
}

AllocationLedger& ProcessLedger() {
  static AllocationLedger* const ledger = new AllocationLedger();
  return *ledger;
}

void AllocationLedger::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  live_.clear();
  live_bytes_ = {};
  allocated_ = reserved_ = 0;
  position_ = LoopPosition{};
  peak_allocated_ = 0;
  peak_sequence_ = sequence_;
  peak_position_ = LoopPosition{};
  freed_since_peak_.clear();
  peak_moved_ = false;
  classified_ = PeakAllocatedMoment{};
  classified_known_ = false;
  reserved_peak_ = PeakReservedMoment{};
  reserved_peak_known_ = false;
}

void AllocationLedger::ObserveLocked(int64_t allocated, int64_t reserved) {
  allocated_ = allocated;
  reserved_ = reserved;
  if (reserved > reserved_peak_.reserved_bytes ||
      (reserved == reserved_peak_.reserved_bytes && allocated > reserved_peak_.allocated_bytes)) {
    reserved_peak_known_ = true;
    reserved_peak_.reserved_bytes = reserved;
    reserved_peak_.allocated_bytes = allocated;
    reserved_peak_.allocator_cache_bytes = reserved - allocated;
    Stamp(position_, &reserved_peak_);
  }
}

void AllocationLedger::Allocated(uintptr_t address, int64_t bytes, int64_t allocated_after,
                                 int64_t reserved_after) {
  std::lock_guard<std::mutex> lock(mu_);
  Block& block = live_[address];
  // An address the allocator handed out again was freed in between (a free the ledger missed
  // cannot happen after it was attached; the old entry is dropped either way).
  Of(live_bytes_, block.category) -= block.bytes;
  block = Block{bytes, ++sequence_, BlockCategory::kTemporary};
  Of(live_bytes_, BlockCategory::kTemporary) += bytes;
  if (allocated_after > peak_allocated_) {
    peak_allocated_ = allocated_after;
    peak_sequence_ = sequence_;
    peak_position_ = position_;
    freed_since_peak_.clear();
    peak_moved_ = true;
  }
  ObserveLocked(allocated_after, reserved_after);
}

void AllocationLedger::Freed(uintptr_t address, int64_t allocated_after, int64_t reserved_after) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(address);
  if (it != live_.end()) {
    Of(live_bytes_, it->second.category) -= it->second.bytes;
    if (it->second.sequence <= peak_sequence_) freed_since_peak_.push_back(it->second);
    live_.erase(it);
  }
  ObserveLocked(allocated_after, reserved_after);
}

void AllocationLedger::Observe(int64_t allocated, int64_t reserved) {
  std::lock_guard<std::mutex> lock(mu_);
  ObserveLocked(allocated, reserved);
}

int64_t AllocationLedger::BlockBytes(uintptr_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(address);
  return it == live_.end() ? -1 : it->second.bytes;
}

int64_t AllocationLedger::peak_allocated() {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_allocated_;
}

void AllocationLedger::StartPoint() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_allocated_ = allocated_;
  peak_sequence_ = sequence_;
  peak_position_ = position_;
  freed_since_peak_.clear();
  peak_moved_ = true;
  classified_ = PeakAllocatedMoment{};
  classified_known_ = false;
  reserved_peak_ = PeakReservedMoment{};
  reserved_peak_known_ = false;
  ObserveLocked(allocated_, reserved_);
}

void AllocationLedger::SetPosition(const LoopPosition& position) {
  std::lock_guard<std::mutex> lock(mu_);
  position_ = position;
}

uint64_t AllocationLedger::Mark() {
  std::lock_guard<std::mutex> lock(mu_);
  return sequence_;
}

void AllocationLedger::Attribute(uint64_t since, BlockCategory survivors,
                                 const std::unordered_map<uintptr_t, BlockCategory>& known) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, block] : live_) {
    if (block.sequence <= since || block.category != BlockCategory::kTemporary) continue;
    auto it = known.find(address);
    const BlockCategory category = it != known.end() ? it->second : survivors;
    Of(live_bytes_, block.category) -= block.bytes;
    block.category = category;
    Of(live_bytes_, category) += block.bytes;
  }
}

CategoryByteArray AllocationLedger::LiveBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  CategoryByteArray bytes = live_bytes_;
  int64_t seen = 0;
  for (int64_t b : bytes) seen += b;
  Of(bytes, BlockCategory::kTemporary) += allocated_ - seen;  // allocations the ledger never saw
  return bytes;
}

bool AllocationLedger::ClassifyPeakIfMoved() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!peak_moved_) return false;
  peak_moved_ = false;
  CategoryByteArray bytes{};
  int64_t seen = 0;
  for (const auto& [address, block] : live_) {
    if (block.sequence > peak_sequence_) continue;
    Of(bytes, block.category) += block.bytes;
    seen += block.bytes;
  }
  for (const Block& block : freed_since_peak_) {
    Of(bytes, block.category) += block.bytes;
    seen += block.bytes;
  }
  Of(bytes, BlockCategory::kTemporary) += peak_allocated_ - seen;
  classified_known_ = true;
  classified_.allocated_bytes = peak_allocated_;
  classified_.categories = ToCategoryBytes(bytes);
  classified_.has_categories = true;
  Stamp(peak_position_, &classified_);
  return true;
}

PeakAllocatedMoment AllocationLedger::allocated_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  return classified_;
}

PeakReservedMoment AllocationLedger::reserved_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_peak_;
}

void AllocationLedger::FillPeakMoments(MemoryAnatomy* anatomy) {
  std::lock_guard<std::mutex> lock(mu_);
  anatomy->at_peak_allocated = classified_;
  anatomy->has_at_peak_allocated = classified_known_;
  anatomy->at_peak_reserved = reserved_peak_;
  anatomy->has_at_peak_reserved = reserved_peak_known_;
}

}  // namespace vramlab::worker
