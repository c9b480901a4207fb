#include "client/report_svg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/anatomy_bar_svg.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/predicted_reserved.h"
#include "client/svg_text.h"
#include "client/text_layout.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

// Geometry of the picture, in SVG user units.
constexpr double kWidth = 960, kMinHeight = 580;
constexpr double kChartLeft = 90, kChartTop = 70, kChartWidth = 840, kChartHeight = 300;
constexpr const char* kAllocatedColor = "#1f4e99";
constexpr const char* kReservedColor = "#e8710a";

// 1, 2 or 5 times a power of ten, at least max/6.
double NiceNumber(double max) {
  const double raw = max / 6.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-12))));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * magnitude >= raw) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

// A round byte step, in the binary unit the maximum is shown in.
double NiceByteStep(double max_bytes) {
  double unit = 1;
  while (unit * 1024 <= max_bytes && unit < std::ldexp(1.0, 40)) unit *= 1024;
  return NiceNumber(max_bytes / unit) * unit;
}

struct Scale {
  double t_max;
  double y_max;
  double X(double t) const { return kChartLeft + (t_max > 0 ? t / t_max : 0) * kChartWidth; }
  double Y(double bytes) const { return kChartTop + kChartHeight * (1.0 - bytes / y_max); }
};

std::string Polyline(const char* id, const char* series, const char* color,
                     const std::vector<vramlab::v1::MemorySample>& samples, const Scale& scale,
                     bool reserved) {
  std::string points;
  for (const auto& s : samples) {
    const double bytes = static_cast<double>(reserved ? s.reserved_bytes() : s.allocated_bytes());
    absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(s.time_seconds()), scale.Y(bytes));
  }
  if (!points.empty()) points.pop_back();
  return absl::StrFormat(
      "<polyline id=\"%s\" class=\"series\" data-series=\"%s\" data-points=\"%d\" fill=\"none\" "
      "stroke=\"%s\" stroke-width=\"1.6\" stroke-linejoin=\"round\" points=\"%s\"/>\n",
      id, series, samples.size(), color, points);
}

// The predicted reserved step line (predicted_reserved.h), dashed in the reserved series' color;
// points above the chart are clipped to its top. Nothing when there is no line.
std::string PredictedReservedPolyline(const std::vector<PredictedReservedPoint>& line,
                                      const Scale& scale) {
  if (line.empty()) return "";
  std::string points;
  int64_t max_bytes = 0;
  for (const auto& p : line) {
    const double y = std::max(scale.Y(static_cast<double>(p.bytes)), kChartTop);
    absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(p.time_seconds), y);
    max_bytes = std::max(max_bytes, p.bytes);
  }
  points.pop_back();
  return absl::StrFormat(
      "<polyline id=\"predicted-reserved\" class=\"series\" data-series=\"predicted reserved\" "
      "data-points=\"%d\" data-max-bytes=\"%d\" fill=\"none\" stroke=\"%s\" "
      "stroke-width=\"1.4\" stroke-dasharray=\"5,3\" points=\"%s\"/>\n",
      line.size(), max_bytes, kReservedColor, points);
}

// A dashed line across the chart at `bytes`; its label goes where the layout finds room, preferring
// just above the line's right end.
std::string ReferenceLine(const char* id, int64_t bytes, const std::string& label,
                          const char* color, const Scale& scale, LabelLayout& layout) {
  const double y = scale.Y(static_cast<double>(bytes));
  std::string out = absl::StrFormat(
      "<line id=\"%s\" data-bytes=\"%d\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
      "stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n",
      id, bytes, kChartLeft, y, kChartLeft + kChartWidth, y, color);
  const double right = kChartLeft + kChartWidth - 4, left = kChartLeft + 4;
  LabelCandidates candidates{
      label, {11, false}, TextAnchor::kEnd, {{right, y - 4}, {right, y + 13}}};
  auto placed = layout.Place(candidates, 0);
  if (!placed) {
    candidates.anchor = TextAnchor::kStart;
    candidates.positions = {{left, y - 4}, {left, y + 13}};
    placed = layout.Place(candidates, 0);
  }
  if (!placed) {
    candidates.anchor = TextAnchor::kEnd;
    candidates.positions = {{right, y - 4}};
    placed = layout.Place(candidates, kChartHeight);
  }
  if (placed) out += SvgLabelText(absl::StrCat(id, "-label"), candidates, *placed, color);
  return out;
}

// Grid lines and tick labels; a tick label that would touch one already drawn is left out.
std::string Axes(const Scale& scale, LabelLayout& layout) {
  std::string out;
  const TextStyle tick{11, false};
  const double y_step = NiceByteStep(scale.y_max);
  for (double v = 0; v <= scale.y_max * (1 + 1e-9); v += y_step) {
    const double y = scale.Y(v);
    absl::StrAppendFormat(
        &out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n",
        kChartLeft, y, kChartLeft + kChartWidth, y);
    const std::string label = FormatBytes(static_cast<int64_t>(v));
    if (layout.IsFree(TextBox(label, kChartLeft - 6, y + 4, tick, TextAnchor::kEnd))) {
      out += SvgFixedText(layout, "", label, kChartLeft - 6, y + 4, tick, TextAnchor::kEnd);
    }
  }
  if (scale.t_max > 0) {
    const double t_step = NiceNumber(scale.t_max);
    for (double t = 0; t <= scale.t_max * (1 + 1e-9); t += t_step) {
      const std::string label = absl::StrFormat("%g s", t);
      const double y = kChartTop + kChartHeight + 18;
      if (layout.IsFree(TextBox(label, scale.X(t), y, tick, TextAnchor::kMiddle))) {
        out += SvgFixedText(layout, "", label, scale.X(t), y, tick, TextAnchor::kMiddle);
      }
    }
  }
  absl::StrAppendFormat(&out,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#999\"/>\n",
                        kChartLeft, kChartTop, kChartWidth, kChartHeight);
  return out;
}

std::string PhaseBands(const Timeline& timeline, const Scale& scale) {
  std::string out = "<g id=\"phase-bands\">\n";
  for (const auto& band : timeline.bands) {
    const double x = scale.X(band.start_seconds);
    const double width = std::max(scale.X(band.end_seconds) - x, 0.5);
    absl::StrAppendFormat(
        &out,
        "<rect class=\"phase-band\" data-phase=\"%s\" data-step=\"%d\" x=\"%.2f\" y=\"%.1f\" "
        "width=\"%.2f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.55\"><title>%s, step %d, "
        "micro-step %d</title></rect>\n",
        PhaseName(band.phase), band.step, x, kChartTop, width, kChartHeight, PhaseColor(band.phase),
        PhaseName(band.phase), band.step, band.micro_step);
  }
  out += "</g>\n";
  return out;
}

// The live bytes by category over time, stacked (from the readings that carry categories): each
// category a band from the sum of those below it to that sum plus its own bytes, so the top edge
// is allocated. A block joins its category when the phase that allocated it ends; until then it is
// among the temporaries.
std::string CategoryAreas(const std::vector<vramlab::v1::MemorySample>& samples,
                          const Scale& scale) {
  std::vector<const vramlab::v1::MemorySample*> with;
  for (const auto& s : samples) {
    if (s.has_categories()) with.push_back(&s);
  }
  if (with.size() < 2) return "";
  std::string out = "<g id=\"category-areas\">\n";
  std::vector<double> below(with.size(), 0.0);
  for (const auto& c : AnatomyComponents()) {
    if (c.category == nullptr) continue;
    std::vector<double> top(with.size());
    bool any = false;
    for (size_t i = 0; i < with.size(); ++i) {
      const int64_t bytes = std::max<int64_t>(c.category(with[i]->categories()), 0);
      any = any || bytes > 0;
      top[i] = below[i] + static_cast<double>(bytes);
    }
    if (any) {
      std::string points;
      for (size_t i = 0; i < with.size(); ++i) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(with[i]->time_seconds()),
                              scale.Y(top[i]));
      }
      for (size_t i = with.size(); i-- > 0;) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(with[i]->time_seconds()),
                              scale.Y(below[i]));
      }
      points.pop_back();
      absl::StrAppendFormat(
          &out,
          "<polygon class=\"category-area\" data-category=\"%s\" fill=\"%s\" "
          "fill-opacity=\"0.75\" stroke=\"none\" points=\"%s\"><title>%s</title></polygon>\n",
          c.key, c.color, points, c.label);
    }
    below = top;
  }
  out += "</g>\n";
  return out;
}

// Legend of the two series and the phases that occur, under the time axis, flowing onto a second
// row when the chart's width is used up. Returns the baseline of its last row.
double Legend(const Timeline& timeline, bool predicted_reserved, LabelLayout& layout,
              std::string* out) {
  std::set<int> phases;
  for (const auto& band : timeline.bands) phases.insert(band.phase);
  *out += "<g id=\"legend\">\n";
  const TextStyle style{12, false};
  double x = kChartLeft;
  double y = kChartTop + kChartHeight + 42;
  // Each entry: its swatch (drawn by `swatch` at x, y) and its label after it.
  const auto entry = [&](const std::string& label, double swatch_width,
                         const std::function<std::string(double, double)>& swatch) {
    const double width = swatch_width + 4 + TextWidth(label, style);
    if (x > kChartLeft && x + width > kChartLeft + kChartWidth) {
      x = kChartLeft;
      y += 20;
    }
    *out += swatch(x, y);
    *out += SvgFixedText(layout, "", label, x + swatch_width + 4, y, style, TextAnchor::kStart);
    x += width + 20;
  };
  for (const auto& [label, color] :
       {std::pair{"allocated", kAllocatedColor}, std::pair{"reserved", kReservedColor}}) {
    entry(label, 18, [color = color](double sx, double sy) {
      return absl::StrFormat(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
          "stroke-width=\"3\"/>",
          sx, sy - 4, sx + 18, sy - 4, color);
    });
  }
  if (predicted_reserved) {
    entry("predicted reserved", 18, [](double sx, double sy) {
      return absl::StrFormat(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
          "stroke-width=\"2\" stroke-dasharray=\"5,3\"/>",
          sx, sy - 4, sx + 18, sy - 4, kReservedColor);
    });
  }
  for (int phase : phases) {
    const auto p = static_cast<vramlab::v1::Phase>(phase);
    entry(PhaseName(p), 14, [p](double sx, double sy) {
      return absl::StrFormat("<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>",
                             sx, sy - 10, PhaseColor(p));
    });
  }
  *out += "</g>\n";
  return y;
}

// For a run that ran out of memory: the refused request, drawn where it would have gone — from
// what was allocated at the failure up by the request's size, at the failure's time — and its
// label where the layout finds room beside it.
std::string OomMarker(const Experiment& e, const Scale& scale, LabelLayout& layout) {
  if (!e.has_oom() || !e.oom().has_memory()) return "";
  const auto& oom = e.oom();
  const double x = scale.X(oom.memory().time_seconds());
  const double base = static_cast<double>(oom.memory().allocated_bytes());
  const double top_value = base + static_cast<double>(oom.requested_bytes());
  const double y_base = scale.Y(base);
  const double y_top = std::max(scale.Y(top_value), kChartTop);
  const bool beyond = scale.Y(top_value) < kChartTop;
  const double height = std::max(y_base - y_top, 2.0);
  layout.Occupy(Box{x - 6, y_top - 1, x + 6, y_top + height + 1});
  std::string out = absl::StrFormat(
      "<g id=\"oom-request\" data-requested-bytes=\"%d\" data-allocated-bytes=\"%d\">\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"%.1f\" fill=\"none\" stroke=\"#c00000\" "
      "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>\n",
      oom.requested_bytes(), oom.memory().allocated_bytes(), x - 5, y_top, height);
  const double y = std::max(y_top + 12, kChartTop + 14);
  LabelCandidates label{absl::StrCat("OOM: request of ", FormatBytes(oom.requested_bytes()),
                                     " refused", beyond ? " (beyond the chart)" : ""),
                        {12, true},
                        TextAnchor::kEnd,
                        {{x - 10, y}}};
  auto placed = layout.Place(label, 0);
  if (!placed) {
    label.anchor = TextAnchor::kStart;
    label.positions = {{x + 10, y}};
    placed = layout.Place(label, 0);
  }
  if (!placed) {
    label.anchor = x > kChartLeft + kChartWidth / 2 ? TextAnchor::kEnd : TextAnchor::kStart;
    label.positions = {{label.anchor == TextAnchor::kEnd ? x - 10 : x + 10, y}};
    placed = layout.Place(label, kChartHeight);
  }
  if (placed) out += SvgLabelText("oom-label", label, *placed, "#c00000");
  return out + "</g>\n";
}

}  // namespace

const char* PhaseColor(vramlab::v1::Phase phase) {
  switch (phase) {
    case vramlab::v1::SETUP:
      return "#e6e6e6";
    case vramlab::v1::LOAD:
      return "#d0d0d0";
    case vramlab::v1::FORWARD:
      return "#c6dbef";
    case vramlab::v1::BACKWARD:
      return "#fdd0a2";
    case vramlab::v1::OPTIMIZER_STEP:
      return "#c7e9c0";
    case vramlab::v1::ZERO_GRAD:
      return "#fcbba1";
    case vramlab::v1::TEARDOWN:
      return "#dadaeb";
    default:
      return "#f0f0f0";
  }
}

std::string XmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

std::string RenderSvg(const Experiment& e, const Timeline& timeline) {
  const MemoryAnatomy* measured = e.has_report() ? &e.report().anatomy() : nullptr;
  int64_t data_max = timeline.max_reserved_bytes;
  for (const auto& s : timeline.samples) data_max = std::max(data_max, s.allocated_bytes());
  if (measured != nullptr) data_max = std::max(data_max, measured->peak_allocated_bytes());
  // Reference lines widen the scale only when they are near the data, or the data is squashed.
  const int64_t limit = e.spec().memory().device_memory_limit_bytes();
  const int64_t predicted = e.has_prediction() ? e.prediction().predicted_peak_bytes() : 0;
  const std::vector<PredictedReservedPoint> predicted_reserved = PredictedReservedLine(e, timeline);
  int64_t predicted_reserved_max = 0;
  for (const auto& point : predicted_reserved) {
    predicted_reserved_max = std::max(predicted_reserved_max, point.bytes);
  }
  int64_t y_max = std::max<int64_t>(data_max, 1024);
  for (int64_t reference : {limit, predicted, predicted_reserved_max}) {
    if (reference > 0 && reference <= 2 * std::max<int64_t>(data_max, 1)) {
      y_max = std::max(y_max, reference);
    }
  }
  const Scale scale{timeline.end_seconds, static_cast<double>(y_max) * 1.08};
  // Every text's box is taken in the layout as it is drawn; the labels inside the chart (peak,
  // OOM, limit, prediction) then go where nothing is. The frame is as tall as any text may go.
  LabelLayout layout(Box{0, 0, kWidth, 10000});

  const std::string title =
      absl::StrCat(e.id(), e.spec().name().empty() ? "" : "  ", e.spec().name());
  // The outcome has a line of its own, and each line is cut to the width it is drawn in (the full
  // text stays in the tooltip).
  const double text_width = kWidth - kChartLeft - 20;
  std::string body;
  body += SvgFixedText(layout, "id=\"title\"", FitText(title, text_width, {17, true}), kChartLeft,
                       24, {17, true}, TextAnchor::kStart);
  body +=
      SvgFixedText(layout, "id=\"outcome\"", FitText(OutcomeSummary(e), text_width, {12, false}),
                   kChartLeft, 42, {12, false}, TextAnchor::kStart);
  body += SvgFixedText(layout, "id=\"settings\" fill=\"#555\"",
                       FitText(SpecSummary(e.spec()), text_width, {11, false}), kChartLeft, 57,
                       {11, false}, TextAnchor::kStart);
  body += PhaseBands(timeline, scale);
  body += CategoryAreas(Downsample(timeline.samples, 800), scale);
  body += Axes(scale, layout);
  body += Polyline("series-reserved", "reserved", kReservedColor, Downsample(timeline.samples, 800),
                   scale, true);
  body += Polyline("series-allocated", "allocated", kAllocatedColor,
                   Downsample(timeline.samples, 800), scale, false);
  body += PredictedReservedPolyline(predicted_reserved, scale);
  std::string legend;
  const double legend_bottom = Legend(timeline, !predicted_reserved.empty(), layout, &legend);
  std::string bar;
  const double bar_bottom =
      AnatomyBarSvg(e, kChartLeft, kChartWidth, legend_bottom + 62, layout, &bar);

  // The labels inside the chart, most important first: each takes the first free place.
  if (timeline.peak_index >= 0) {
    const auto& peak = timeline.samples[timeline.peak_index];
    const double x = scale.X(peak.time_seconds());
    const double y = scale.Y(static_cast<double>(peak.allocated_bytes()));
    layout.Occupy(Box{x - 6, y - 6, x + 6, y + 6});
    absl::StrAppendFormat(
        &body,
        "<circle id=\"peak-marker\" data-bytes=\"%d\" data-time=\"%.3f\" cx=\"%.1f\" "
        "cy=\"%.1f\" r=\"5\" fill=\"#c00000\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n",
        peak.allocated_bytes(), peak.time_seconds(), x, y);
    const bool right_half = x > kChartLeft + kChartWidth / 2;
    const double above = std::max(y - 8, kChartTop + 14), below = y + 20;
    LabelCandidates label{
        absl::StrCat("peak ", FormatBytes(peak.allocated_bytes()), " (", PhaseName(peak.phase()),
                     ")"),
        {12, true},
        right_half ? TextAnchor::kEnd : TextAnchor::kStart,
        {{right_half ? x - 8 : x + 8, above}, {right_half ? x - 8 : x + 8, below}}};
    auto placed = layout.Place(label, kChartHeight);
    if (placed) body += SvgLabelText("peak-label", label, *placed, "#c00000");
  } else {
    body += SvgFixedText(layout, "", "no memory readings recorded", kChartLeft + 20,
                         kChartTop + kChartHeight / 2, {13, false}, TextAnchor::kStart);
  }
  body += OomMarker(e, scale, layout);
  if (limit > 0 && limit <= y_max) {
    body += ReferenceLine("limit-line", limit, absl::StrCat("limit ", FormatBytes(limit)),
                          "#c00000", scale, layout);
  } else if (limit > 0) {
    // Far above the data: named in a corner rather than squashing the lines flat.
    LabelCandidates label{absl::StrCat("limit ", FormatBytes(limit), " (above the chart)"),
                          {11, false},
                          TextAnchor::kEnd,
                          {{kChartLeft + kChartWidth, kChartTop - 6},
                           {kChartLeft + kChartWidth - 4, kChartTop + 14}}};
    auto placed = layout.Place(label, kChartHeight);
    if (placed) {
      absl::StrAppendFormat(
          &body,
          "<text id=\"limit-note\" class=\"label\" data-bytes=\"%d\" x=\"%.1f\" y=\"%.1f\" "
          "font-size=\"11\" text-anchor=\"end\" fill=\"#c00000\">%s</text>\n",
          limit, placed->first, placed->second, XmlEscape(label.text));
    }
  }
  if (predicted > 0 && predicted <= y_max) {
    body += ReferenceLine("predicted-peak-line", predicted,
                          absl::StrCat("predicted peak ", FormatBytes(predicted)), "#666666", scale,
                          layout);
  }
  body += legend;
  body += bar;

  const double height = std::max(kMinHeight, bar_bottom + 20);
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
      "%.0f\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<title>%s  %s</title>\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"#ffffff\"/>\n%s</svg>\n",
      kWidth, height, kWidth, height, XmlEscape(title), XmlEscape(OutcomeSummary(e)), body);
}

}  // namespace vramlab::client
