#include "client/anatomy_bar_svg.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/report_svg.h"
#include "client/svg_text.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

constexpr double kBarHeight = 26;

// One segment per shown component and its legend entry, left to right; `bytes_of` gives each
// component's bytes (nullopt: not part of this bar). The legend flows in rows under the bar;
// returns the baseline of its last row.
double BarSegments(const MemoryAnatomy& anatomy, int64_t total, double left, double chart_width,
                   double bar_top,
                   const std::function<std::optional<int64_t>(const AnatomyComponent&)>& bytes_of,
                   LabelLayout& layout, std::string* out) {
  const TextStyle style{12, false};
  double x = left;
  double lx = left, ly = bar_top + kBarHeight + 24;
  for (const auto& c : AnatomyComponents()) {
    const std::optional<int64_t> value = bytes_of(c);
    if (!value || !IsShown(c, {&anatomy})) continue;
    const int64_t bytes = std::max<int64_t>(*value, 0);
    const double width = total > 0 ? chart_width * static_cast<double>(bytes) / total : 0;
    absl::StrAppendFormat(out,
                          "<rect class=\"anatomy-segment\" data-category=\"%s\" data-bytes=\"%d\" "
                          "x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                          "<title>%s: %s</title></rect>\n",
                          c.key, bytes, x, bar_top, width, kBarHeight, c.color, c.label,
                          XmlEscape(FormatBytes(bytes)));
    const std::string label = absl::StrCat(c.label, " ", FormatBytes(bytes));
    const double entry = 16 + TextWidth(label, style);
    if (lx > left && lx + entry > left + chart_width) {
      lx = left;
      ly += 20;
    }
    absl::StrAppendFormat(out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>",
                          lx, ly - 10, c.color);
    *out += SvgFixedText(layout, "", label, lx + 16, ly, style, TextAnchor::kStart);
    lx += entry + 24;
    x += width;
  }
  return ly;
}

// The anatomy as a stacked bar whose top is at `bar_top`, a title (what the bar is and its total)
// and a line of detail above it, each cut to the chart's width. Returns the lowest baseline drawn.
}  // namespace

double AnatomyBarSvg(const Experiment& e, double left, double width, double bar_top,
                     LabelLayout& layout, std::string* out) {
  const bool measured = e.has_report();
  const TextStyle title_style{13, true}, detail_style{11, false};
  const auto titles = [&](const std::string& title, const std::string& detail) {
    *out += SvgFixedText(layout, "id=\"anatomy-title\"", FitText(title, width, title_style), left,
                         bar_top - 24, title_style, TextAnchor::kStart);
    if (!detail.empty()) {
      *out += SvgFixedText(layout, "id=\"anatomy-detail\" fill=\"#555\"",
                           FitText(detail, width, detail_style), left, bar_top - 8, detail_style,
                           TextAnchor::kStart);
    }
  };
  if (!measured && !e.has_prediction()) {
    titles(absl::StrCat("no anatomy: ", OutcomeSummary(e)), "");
    return bar_top - 24;
  }
  const MemoryAnatomy& anatomy = measured ? e.report().anatomy() : e.prediction().anatomy();
  if (measured && anatomy.has_at_peak_allocated()) {
    // One moment: what was alive when allocated peaked; the segments sum to peak allocated.
    const auto& moment = anatomy.at_peak_allocated();
    titles(absl::StrFormat("measured anatomy at peak allocated (%s, step %d): %s",
                           PhaseName(moment.phase()), moment.step(),
                           FormatBytes(moment.allocated_bytes())),
           anatomy.has_at_peak_reserved()
               ? absl::StrCat("cache at peak reserved ",
                              FormatBytes(anatomy.at_peak_reserved().allocator_cache_bytes()))
               : "");
    absl::StrAppendFormat(out,
                          "<g id=\"anatomy-bar\" data-kind=\"at-peak\" data-total-bytes=\"%d\">\n",
                          moment.allocated_bytes());
    const double bottom = BarSegments(
        anatomy, moment.allocated_bytes(), left, width, bar_top,
        [&](const AnatomyComponent& c) -> std::optional<int64_t> {
          if (c.category == nullptr) return std::nullopt;
          return c.category(moment.categories());
        },
        layout, out);
    *out += "</g>\n";
    return bottom;
  }
  int64_t total = 0;
  for (const auto& c : AnatomyComponents()) total += std::max<int64_t>(c.bytes(anatomy), 0);
  // The categories are each one's own maximum over the run (their peaks need not coincide), plus
  // the allocator cache and the CUDA context: the sum is said to be that, next to the peaks.
  titles(absl::StrCat(measured ? "measured" : "predicted", " anatomy: ", FormatBytes(total)),
         absl::StrCat("the sum of each category's maximum; peak allocated ",
                      FormatBytes(anatomy.peak_allocated_bytes()), ", peak device used ",
                      FormatBytes(anatomy.peak_device_used_bytes())));
  absl::StrAppendFormat(out, "<g id=\"anatomy-bar\" data-kind=\"%s\" data-total-bytes=\"%d\">\n",
                        measured ? "measured" : "predicted", total);
  const double bottom = BarSegments(
      anatomy, total, left, width, bar_top,
      [&](const AnatomyComponent& c) -> std::optional<int64_t> { return c.bytes(anatomy); }, layout,
      out);
  *out += "</g>\n";
  return bottom;
}

}  // namespace vramlab::client
