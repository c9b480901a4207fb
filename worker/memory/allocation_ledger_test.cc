// The ledger's two moments on hand-made event streams: the allocated peak's live set (including
// blocks freed after it), attribution by phase, what it never saw, and the reserved peak.
#include "worker/memory/allocation_ledger.h"

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

int64_t Sum(const CategoryBytes& c) {
  return c.weights_bytes + c.adapter_weights_bytes + c.quantization_constants_bytes +
         c.gradients_bytes + c.optimizer_state_bytes + c.activations_bytes + c.temporaries_bytes;
}

// A CPU-like allocator: reserved == allocated, totals kept here.
class FakeAllocator {
 public:
  explicit FakeAllocator(AllocationLedger* ledger) : ledger_(ledger) {}
  void Alloc(uintptr_t address, int64_t bytes) {
    allocated_ += bytes;
    ledger_->Allocated(address, bytes, allocated_, allocated_);
  }
  void Free(uintptr_t address, int64_t bytes) {
    allocated_ -= bytes;
    ledger_->Freed(address, allocated_, allocated_);
  }

 private:
  AllocationLedger* ledger_;
  int64_t allocated_ = 0;
};

TEST(AllocationLedgerTest, PeakMomentCountsBlocksFreedAfterItByTheirCategory) {
  AllocationLedger ledger;
  FakeAllocator a(&ledger);
  ledger.StartPoint();
  const uint64_t load = ledger.Mark();
  a.Alloc(0x100, 1000);  // weight
  ledger.Attribute(load, BlockCategory::kWeights, {});
  const uint64_t forward = ledger.Mark();
  a.Alloc(0x200, 300);  // saved activation
  a.Alloc(0x300, 50);   // freed inside forward: a temporary
  a.Free(0x300, 50);
  ledger.Attribute(forward, BlockCategory::kActivations, {});
  const uint64_t backward = ledger.Mark();
  a.Alloc(0x400, 1000);  // gradient
  a.Alloc(0x500, 200);   // backward temporary: peak = 1000 + 300 + 1000 + 200 = 2500
  a.Free(0x500, 200);
  a.Free(0x200, 300);  // the activation is freed after the peak
  ledger.Attribute(backward, BlockCategory::kTemporary, {{0x400, BlockCategory::kGradients}});
  ASSERT_TRUE(ledger.ClassifyPeakIfMoved());

  const PeakAllocatedMoment peak = ledger.allocated_peak();
  EXPECT_EQ(peak.allocated_bytes, 2500);
  EXPECT_EQ(peak.categories.weights_bytes, 1000);
  EXPECT_EQ(peak.categories.activations_bytes, 300);
  EXPECT_EQ(peak.categories.gradients_bytes, 1000);
  EXPECT_EQ(peak.categories.temporaries_bytes, 200);
  EXPECT_EQ(Sum(peak.categories), peak.allocated_bytes);
  EXPECT_FALSE(ledger.ClassifyPeakIfMoved());  // nothing new
}

TEST(AllocationLedgerTest, AllocationsItNeverSawAreTheRemainder) {
  AllocationLedger ledger;
  // 4096 bytes were allocated before the ledger was attached: only the totals show them.
  ledger.Allocated(0x10, 100, 4096 + 100, 4096 + 100);
  ledger.Freed(0x99, 4096 + 100 - 64, 4096 + 100 - 64);  // one of them freed: unknown address
  ledger.Allocated(0x20, 64, 4096 + 100, 4096 + 100);
  ASSERT_TRUE(ledger.ClassifyPeakIfMoved());
  const PeakAllocatedMoment peak = ledger.allocated_peak();
  EXPECT_EQ(peak.allocated_bytes, 4196);
  EXPECT_EQ(Sum(peak.categories), 4196);
  EXPECT_EQ(peak.categories.temporaries_bytes, 4196);
}

TEST(AllocationLedgerTest, StartPointRestartsThePeakFromTheCurrentTotals) {
  AllocationLedger ledger;
  FakeAllocator a(&ledger);
  a.Alloc(0x1, 5000);
  a.Free(0x1, 5000);
  a.Alloc(0x2, 10);
  ledger.StartPoint();
  a.Alloc(0x3, 20);
  ledger.ClassifyPeakIfMoved();
  EXPECT_EQ(ledger.allocated_peak().allocated_bytes, 30);
  EXPECT_EQ(ledger.reserved_peak().reserved_bytes, 30);
}

TEST(AllocationLedgerTest, ReservedPeakIsTheFullestMomentAtTheLargestFootprint) {
  AllocationLedger ledger;
  ledger.StartPoint();
  ledger.Observe(0, 2048);                  // a segment reserved before the block is handed out
  ledger.Allocated(0x1, 1536, 1536, 2048);  // fullest at 2048 reserved: cache 512
  ledger.Freed(0x1, 0, 2048);
  ledger.Observe(0, 1024);  // segment released
  const PeakReservedMoment r = ledger.reserved_peak();
  EXPECT_EQ(r.reserved_bytes, 2048);
  EXPECT_EQ(r.allocated_bytes, 1536);
}

TEST(AllocationLedgerTest, LiveBytesFollowAttribution) {
  AllocationLedger ledger;
  FakeAllocator a(&ledger);
  const uint64_t mark = ledger.Mark();
  a.Alloc(0x1, 100);
  a.Alloc(0x2, 40);
  EXPECT_EQ(ledger.LiveBytes()[static_cast<size_t>(BlockCategory::kTemporary)], 140);
  ledger.Attribute(mark, BlockCategory::kOptimizerState, {{0x2, BlockCategory::kGradients}});
  const CategoryBytes live = ToCategoryBytes(ledger.LiveBytes());
  EXPECT_EQ(live.optimizer_state_bytes, 100);
  EXPECT_EQ(live.gradients_bytes, 40);
  EXPECT_EQ(live.temporaries_bytes, 0);
  a.Free(0x1, 100);
  EXPECT_EQ(ToCategoryBytes(ledger.LiveBytes()).optimizer_state_bytes, 0);
}

}  // namespace
}  // namespace vramlab::worker
