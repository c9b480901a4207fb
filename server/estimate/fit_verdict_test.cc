#include "server/estimate/fit_verdict.h"

#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/device_model.h"
#include "server/estimate/reserved_model.h"

namespace vramlab::server::estimate {
namespace {

MomentReserved At(vramlab::v1::Phase phase, int64_t allocated, int64_t fragmentation) {
  MomentReserved m;
  m.phase = phase;
  m.allocated = allocated;
  m.low = allocated;
  m.fragmentation = fragmentation;
  return m;
}

// high = low + fragmentation + under * allocated; floor = low * (1 - over).
TEST(FitVerdictTest, ThreeWayAgainstTheBandOfTheWorstMoment) {
  const ModelError error{0.25, 0.5};  // exact in binary, so the bytes below are exact
  const std::vector<MomentReserved> moments = {
      At(vramlab::v1::BACKWARD, 100 * kMiB, 50 * kMiB),  // high 175 MiB, floor 50 MiB
      At(vramlab::v1::OPTIMIZER_STEP, 120 * kMiB, 0)};   // high 150 MiB, floor 60 MiB
  EXPECT_EQ(DecideFit(moments, error, 175 * kMiB).verdict, vramlab::v1::FITS);
  const FitDecision tight = DecideFit(moments, error, 175 * kMiB - 1);
  EXPECT_EQ(tight.verdict, vramlab::v1::TIGHT);
  EXPECT_EQ(tight.deciding_phase, vramlab::v1::BACKWARD);
  EXPECT_EQ(tight.reserved_low, 100 * kMiB);
  EXPECT_EQ(tight.reserved_high, 175 * kMiB);
  EXPECT_EQ(tight.margin, 125 * kMiB);
  // The step's floor decides DOES_NOT_FIT although backward's band is the wider one.
  EXPECT_EQ(DecideFit(moments, error, 60 * kMiB).verdict, vramlab::v1::TIGHT);
  const FitDecision out = DecideFit(moments, error, 60 * kMiB - 1);
  EXPECT_EQ(out.verdict, vramlab::v1::DOES_NOT_FIT);
  EXPECT_EQ(out.deciding_phase, vramlab::v1::OPTIMIZER_STEP);
  EXPECT_EQ(DecideFit(moments, error, 0).verdict, vramlab::v1::FIT_VERDICT_UNSPECIFIED);
  EXPECT_EQ(DecideFit({}, error, 175 * kMiB).verdict, vramlab::v1::FIT_VERDICT_UNSPECIFIED);
}

TEST(ReservedModelTest, RoundingRulesPerAllocator) {
  EXPECT_EQ(RoundedReserved(AllocatorKind::kCounting, 12345), 12345);
  // Native: the large pool rounded to 2 MiB plus one 2 MiB small segment.
  EXPECT_EQ(RoundedReserved(AllocatorKind::kNative, 100 * kMiB + 1), 104 * kMiB);
  // Expandable: 20 MiB pages plus one 2 MiB small page.
  EXPECT_EQ(RoundedReserved(AllocatorKind::kExpandable, 100 * kMiB + 1), 122 * kMiB);
}

}  // namespace
}  // namespace vramlab::server::estimate
