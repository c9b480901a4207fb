#include "client/fit_verdict_text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::MemoryEstimate;

constexpr int64_t kGiB = int64_t{1} << 30;

MemoryEstimate Tight() {
  MemoryEstimate e;
  e.set_limit_bytes(24 * kGiB);
  e.set_verdict(vramlab::v1::TIGHT);
  e.set_reserved_low_bytes(23 * kGiB);
  e.set_reserved_high_bytes(26 * kGiB);
  e.set_margin_bytes(4 * kGiB);
  e.set_deciding_phase(vramlab::v1::BACKWARD);
  return e;
}

TEST(FitVerdictTextTest, TheVerdictWithItsBandAndMargin) {
  EXPECT_EQ(VerdictLine(Tight()),
            "limit 24.00 GiB: TIGHT: within the 4.00 GiB margin the model cannot resolve "
            "(reserved 23.00 GiB .. 26.00 GiB at the backward)");
  MemoryEstimate fits = Tight();
  fits.set_verdict(vramlab::v1::FITS);
  EXPECT_EQ(VerdictDetail(fits), "FITS (reserved 23.00 GiB .. 26.00 GiB at the backward)");
  MemoryEstimate out = Tight();
  out.set_verdict(vramlab::v1::DOES_NOT_FIT);
  EXPECT_THAT(VerdictDetail(out), ::testing::StartsWith("DOES NOT FIT (reserved "));
  // An estimate stored before verdicts existed: from `fits`, without a band.
  MemoryEstimate old;
  old.set_limit_bytes(24 * kGiB);
  old.set_fits(false);
  EXPECT_EQ(VerdictLine(old), "limit 24.00 GiB: DOES NOT FIT");
  old.set_limit_bytes(0);
  EXPECT_EQ(VerdictLine(old), "");
}

TEST(FitVerdictTextTest, TheReplayedAllocatorsFailingRequestAndLargestSegment) {
  MemoryEstimate e = Tight();
  e.set_verdict(vramlab::v1::DOES_NOT_FIT);
  auto* r = e.mutable_replay();
  r->set_peak_reserved_bytes(24 * kGiB);
  r->set_peak_reserved_phase(vramlab::v1::BACKWARD);
  r->set_peak_reserved_step(1);
  r->set_largest_segment_bytes(kGiB + kGiB / 4);
  r->set_largest_segment_phase(vramlab::v1::FORWARD);
  r->set_largest_segment_step(0);
  r->set_oom(true);
  r->set_oom_phase(vramlab::v1::FORWARD);
  r->set_oom_step(2);
  r->set_oom_requested_bytes(kGiB + kGiB / 4);
  r->set_oom_allocated_bytes(20 * kGiB);
  r->set_oom_reserved_bytes(23 * kGiB);
  r->set_error_band(0.055);
  EXPECT_EQ(VerdictLine(e),
            "limit 24.00 GiB: DOES NOT FIT: out of memory in the forward of step 2 asking for "
            "1.25 GiB (20.00 GiB allocated, 23.00 GiB reserved) (replayed peak reserved 24.00 GiB "
            "at the backward of step 1, largest segment 1.25 GiB in the forward of step 0)");
  e.set_verdict(vramlab::v1::TIGHT);
  // Stored before the band had two sides: the one band above the limit too.
  EXPECT_THAT(VerdictDetail(e),
              HasSubstr("reserved), but fits within the 5.5 % error band above the limit ("));
  r->set_error_band_over(0.01);
  EXPECT_THAT(VerdictDetail(e),
              HasSubstr("reserved), but fits within the 1.0 % error band above the limit ("));
  r->set_oom(false);
  EXPECT_THAT(VerdictDetail(e),
              ::testing::StartsWith("TIGHT: within 5.5 % of the limit at the backward of step 1 "
                                    "(replayed peak reserved 24.00 GiB"));
  e.set_verdict(vramlab::v1::FITS);
  EXPECT_THAT(VerdictDetail(e), ::testing::StartsWith("FITS (replayed peak reserved 24.00 GiB"));
  // The default allocator's second placement: its peak beside the usual one's, and what it
  // decided where only it keeps the run from FITS.
  r->set_error_band(0.005);
  r->set_peak_reserved_bytes(22 * kGiB);
  r->set_peak_reserved_above_bytes(23 * kGiB + kGiB * 9 / 10);
  EXPECT_THAT(VerdictDetail(e),
              HasSubstr("(replayed peak reserved 22.00 GiB at the backward of step 1; 23.90 GiB "
                        "with new segments above the earlier ones, largest segment"));
  e.set_verdict(vramlab::v1::TIGHT);
  EXPECT_THAT(VerdictDetail(e),
              ::testing::StartsWith("TIGHT: fits with new segments below the earlier ones, as "
                                    "usually placed, but is within 0.5 % of the limit with them "
                                    "above ("));
  r->set_oom_above(true);
  EXPECT_THAT(VerdictDetail(e),
              ::testing::StartsWith("TIGHT: fits with new segments below the earlier ones, as "
                                    "usually placed, but runs out of memory with them above ("));
  EXPECT_THAT(VerdictDetail(e), HasSubstr("23.90 GiB before running out with new segments above"));
}

TEST(FitVerdictTextTest, SweepPointsPredictedPerValue) {
  MemoryEstimate e = Tight();
  for (int value : {4096, 6144, 8192}) {
    auto* p = e.add_points();
    p->set_value(value);
    p->set_peak_allocated_bytes(value / 512 * kGiB);
    p->set_reserved_low_bytes(value / 512 * kGiB);
    p->set_reserved_high_bytes(value / 512 * kGiB + kGiB);
    p->set_verdict(value < 8192 ? vramlab::v1::FITS : vramlab::v1::TIGHT);
    p->set_peak_phase(vramlab::v1::BACKWARD);
  }
  e.set_predicted_first_oom_value(8192);
  EXPECT_EQ(PointPredictionText(e, 8192), "predicted 16.00 GiB, TIGHT");
  EXPECT_EQ(PointPredictionText(e, 512), "");
  const std::string list = RenderPredictedSweep(e, "seq_len", /*search=*/false);
  EXPECT_THAT(list, HasSubstr("12.00 GiB .. 13.00 GiB"));
  EXPECT_THAT(list, HasSubstr("predicted first point not to fit: seq_len 8192\n"));
  e.set_predicted_search_fits_up_to(6144);
  e.set_predicted_search_not_ruled_out_up_to(8192);
  EXPECT_THAT(RenderPredictedSweep(e, "seq_len", /*search=*/true),
              HasSubstr("predicted search result: seq_len FITS up to 6144, not ruled out up to "
                        "8192\n"));
}

}  // namespace
}  // namespace vramlab::client
