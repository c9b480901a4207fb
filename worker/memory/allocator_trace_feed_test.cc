// The CUDA trace feed recovers each block's counted size from the allocator's totals, on an event
// stream shaped like the caching allocator's: ALLOC recorded before the block is counted,
// FREE_REQUESTED after it left the totals, block sizes rounded above the requests.
#include "worker/memory/allocator_trace_feed.h"

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

// Mimics the caching allocator's order of counting and tracing.
class FakeCachingAllocator {
 public:
  explicit FakeCachingAllocator(AllocatorTraceFeed* feed) : feed_(feed) {}
  void Alloc(uintptr_t address, int64_t block_bytes) {
    if (allocated_ + block_bytes > reserved_) {
      reserved_ += 1 << 20;
      feed_->OnOther(Totals());  // SEGMENT_ALLOC
    }
    feed_->OnAlloc(address, Totals());  // traced first ...
    allocated_ += block_bytes;          // ... then counted
    peak_ = std::max(peak_, allocated_);
  }
  void Free(uintptr_t address, int64_t block_bytes) {
    allocated_ -= block_bytes;                  // counted first ...
    feed_->OnFreeRequested(address, Totals());  // ... then traced
  }
  void Settle() { feed_->Settle(feed_->events(), Totals()); }
  AllocatorTotals Totals() const { return {allocated_, reserved_, peak_}; }

 private:
  AllocatorTraceFeed* feed_;
  int64_t allocated_ = 0, reserved_ = 0, peak_ = 0;
};

TEST(AllocatorTraceFeedTest, RecoversBlockSizesAndThePeakMoment) {
  AllocationLedger ledger;
  AllocatorTraceFeed feed(&ledger);
  FakeCachingAllocator a(&feed);
  ledger.StartPoint();
  a.Alloc(0x1000, 512);
  a.Alloc(0x2000, 3072);
  a.Free(0x1000, 512);    // the open 0x2000 is completed from the totals plus 0x1000's size
  a.Alloc(0x3000, 1024);  // peak: 3072 + 1024
  a.Settle();
  EXPECT_EQ(ledger.BlockBytes(0x2000), 3072);
  EXPECT_EQ(ledger.BlockBytes(0x3000), 1024);
  a.Free(0x3000, 1024);
  ASSERT_TRUE(ledger.ClassifyPeakIfMoved());
  EXPECT_EQ(ledger.allocated_peak().allocated_bytes, 4096);
  EXPECT_EQ(ledger.allocated_peak().categories.temporaries_bytes, 4096);
  EXPECT_EQ(ledger.reserved_peak().reserved_bytes, 1 << 20);
  EXPECT_EQ(ledger.reserved_peak().allocated_bytes, 4096);
}

TEST(AllocatorTraceFeedTest, AnAllocationFreedAtOnceKeepsThePeakItSet) {
  AllocationLedger ledger;
  AllocatorTraceFeed feed(&ledger);
  FakeCachingAllocator a(&feed);
  ledger.StartPoint();
  a.Alloc(0x1, 1000);
  a.Alloc(0x2, 7000);  // the peak, freed at the very next event
  a.Free(0x2, 7000);
  a.Alloc(0x3, 10);
  a.Settle();
  ledger.ClassifyPeakIfMoved();
  EXPECT_EQ(ledger.allocated_peak().allocated_bytes, 8000);
  EXPECT_EQ(ledger.allocated_peak().categories.temporaries_bytes, 8000);
}

TEST(AllocatorTraceFeedTest, SettleIsIgnoredWhenAnEventArrivedAfterTheReading) {
  AllocationLedger ledger;
  AllocatorTraceFeed feed(&ledger);
  FakeCachingAllocator a(&feed);
  a.Alloc(0x1, 100);
  const uint64_t before = feed.events();
  const AllocatorTotals stale{0, 0, 0};
  a.Alloc(0x2, 200);           // completes 0x1 from fresh totals
  feed.Settle(before, stale);  // must not complete 0x2 from the stale ones
  a.Settle();
  EXPECT_EQ(ledger.BlockBytes(0x1), 100);
  EXPECT_EQ(ledger.BlockBytes(0x2), 200);
}

}  // namespace
}  // namespace vramlab::worker
