#include "client/fit_verdict_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/text_table.h"

namespace vramlab::client {

using vramlab::v1::MemoryEstimate;

std::string VerdictName(vramlab::v1::FitVerdict verdict) {
  switch (verdict) {
    case vramlab::v1::FITS:
      return "FITS";
    case vramlab::v1::TIGHT:
      return "TIGHT";
    case vramlab::v1::DOES_NOT_FIT:
      return "DOES NOT FIT";
    default:
      return "-";
  }
}

std::string VerdictName(const MemoryEstimate& estimate) {
  if (estimate.verdict() == vramlab::v1::FIT_VERDICT_UNSPECIFIED) {
    return estimate.fits() ? "FITS" : "DOES NOT FIT";
  }
  return VerdictName(estimate.verdict());
}

namespace {

std::string StepPoint(vramlab::v1::Phase phase, int32_t step) {
  return absl::StrCat("the ", PhaseName(phase), " of step ", step);
}

// The replayed allocator's verdict: where it runs out (the failing request), or its peak
// reserved, and the largest segment it mapped.
std::string ReplayDetail(const MemoryEstimate& estimate) {
  const MemoryEstimate::ReservedReplay& r = estimate.replay();
  std::string line = VerdictName(estimate);
  if (r.oom()) {
    absl::StrAppend(&line, ": out of memory in ", StepPoint(r.oom_phase(), r.oom_step()),
                    " asking for ", FormatBytes(r.oom_requested_bytes()), " (",
                    FormatBytes(r.oom_allocated_bytes()), " allocated, ",
                    FormatBytes(r.oom_reserved_bytes()), " reserved)");
    if (estimate.verdict() == vramlab::v1::TIGHT) {
      // Estimates stored before the band had two sides have one, for both.
      const double over = r.error_band_over() > 0 ? r.error_band_over() : r.error_band();
      absl::StrAppend(&line, ", but fits within the ", absl::StrFormat("%.1f", 100 * over),
                      " % error band above the limit");
    }
  } else if (estimate.verdict() == vramlab::v1::TIGHT) {
    const std::string band = absl::StrFormat("%.1f", 100 * r.error_band());
    const double limit = static_cast<double>(estimate.limit_bytes());
    const bool usual_fits =
        static_cast<double>(r.peak_reserved_bytes()) + r.error_band() * limit <= limit;
    if (r.peak_reserved_above_bytes() > 0 && usual_fits) {
      // FITS needs both placements of new segments; the one above the earlier ones decided.
      absl::StrAppend(&line, ": fits with new segments below the earlier ones, as usually placed, ",
                      r.oom_above() ? "but runs out of memory"
                                    : absl::StrCat("but is within ", band, " % of the limit"),
                      " with them above");
    } else {
      absl::StrAppend(&line, ": within ", band, " % of the limit at ",
                      StepPoint(r.peak_reserved_phase(), r.peak_reserved_step()));
    }
  }
  absl::StrAppend(&line, " (replayed peak reserved ", FormatBytes(r.peak_reserved_bytes()), " at ",
                  StepPoint(r.peak_reserved_phase(), r.peak_reserved_step()));
  if (r.peak_reserved_above_bytes() > 0) {
    absl::StrAppend(&line, "; ", FormatBytes(r.peak_reserved_above_bytes()),
                    r.oom_above() ? " before running out" : "",
                    " with new segments above the earlier ones");
  }
  absl::StrAppend(&line, ", largest segment ", FormatBytes(r.largest_segment_bytes()), " in ",
                  StepPoint(r.largest_segment_phase(), r.largest_segment_step()), ")");
  return line;
}

}  // namespace

std::string VerdictDetail(const MemoryEstimate& estimate) {
  if (estimate.limit_bytes() <= 0) return "";
  if (estimate.has_replay()) return ReplayDetail(estimate);
  std::string line = VerdictName(estimate);
  if (estimate.verdict() == vramlab::v1::TIGHT) {
    absl::StrAppend(&line, ": within the ", FormatBytes(estimate.margin_bytes()),
                    " margin the model cannot resolve");
  }
  if (estimate.reserved_high_bytes() > 0) {
    absl::StrAppend(&line, " (reserved ", FormatBytes(estimate.reserved_low_bytes()), " .. ",
                    FormatBytes(estimate.reserved_high_bytes()), " at the ",
                    PhaseName(estimate.deciding_phase()), ")");
  }
  return line;
}

std::string VerdictLine(const MemoryEstimate& estimate) {
  if (estimate.limit_bytes() <= 0) return "";
  return absl::StrCat("limit ", FormatBytes(estimate.limit_bytes()), ": ", VerdictDetail(estimate));
}

const vramlab::v1::PointEstimate* FindPoint(const MemoryEstimate& estimate, int64_t value) {
  for (const auto& point : estimate.points()) {
    if (point.value() == value) return &point;
  }
  return nullptr;
}

std::string PointPredictionText(const MemoryEstimate& estimate, int64_t value) {
  const vramlab::v1::PointEstimate* point = FindPoint(estimate, value);
  if (point == nullptr) return "";
  std::string text = absl::StrCat("predicted ", FormatBytes(point->peak_allocated_bytes()));
  if (point->verdict() != vramlab::v1::FIT_VERDICT_UNSPECIFIED) {
    absl::StrAppend(&text, ", ", VerdictName(point->verdict()));
  }
  return text;
}

std::string RenderPredictedSweep(const MemoryEstimate& estimate, const char* variable,
                                 bool search) {
  if (estimate.points_size() == 0) return "";
  using Align = TextTable::Align;
  TextTable table({variable, "peak allocated", "reserved", "verdict", "peak in"},
                  {Align::kRight, Align::kRight, Align::kRight, Align::kLeft, Align::kLeft});
  for (const auto& p : estimate.points()) {
    table.AddRow({absl::StrCat(p.value()), FormatBytes(p.peak_allocated_bytes()),
                  absl::StrCat(FormatBytes(p.reserved_low_bytes()), " .. ",
                               FormatBytes(p.reserved_high_bytes())),
                  VerdictName(p.verdict()), PhaseName(p.peak_phase())});
  }
  std::string out = table.Render();
  if (estimate.limit_bytes() <= 0) return out;
  if (search) {
    absl::StrAppend(&out, "predicted search result: ", variable, " FITS up to ",
                    estimate.predicted_search_fits_up_to(), ", not ruled out up to ",
                    estimate.predicted_search_not_ruled_out_up_to(), "\n");
  } else if (estimate.predicted_first_oom_value() > 0) {
    absl::StrAppend(&out, "predicted first point not to fit: ", variable, " ",
                    estimate.predicted_first_oom_value(), "\n");
  } else {
    absl::StrAppend(&out, "every point predicted to fit\n");
  }
  return out;
}

}  // namespace vramlab::client
