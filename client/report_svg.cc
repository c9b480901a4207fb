#include "client/report_svg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/describe.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

// Geometry of the picture, in SVG user units.
constexpr double kWidth = 960, kHeight = 580;
constexpr double kChartLeft = 90, kChartTop = 70, kChartWidth = 840, kChartHeight = 300;
constexpr double kBarTop = 470, kBarHeight = 26;
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

std::string ReferenceLine(const char* id, int64_t bytes, const std::string& label,
                          const char* color, const Scale& scale) {
  const double y = scale.Y(static_cast<double>(bytes));
  return absl::StrFormat(
      "<line id=\"%s\" data-bytes=\"%d\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
      "stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"%s\">%s</text>\n",
      id, bytes, kChartLeft, y, kChartLeft + kChartWidth, y, color, kChartLeft + kChartWidth - 4,
      y - 4, color, XmlEscape(label));
}

std::string Axes(const Scale& scale) {
  std::string out;
  const double y_step = NiceByteStep(scale.y_max);
  for (double v = 0; v <= scale.y_max * (1 + 1e-9); v += y_step) {
    const double y = scale.Y(v);
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
        kChartLeft, y, kChartLeft + kChartWidth, y, kChartLeft - 6, y + 4,
        XmlEscape(FormatBytes(static_cast<int64_t>(v))));
  }
  if (scale.t_max > 0) {
    const double t_step = NiceNumber(scale.t_max);
    for (double t = 0; t <= scale.t_max * (1 + 1e-9); t += t_step) {
      absl::StrAppendFormat(
          &out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g s</text>\n",
          scale.X(t), kChartTop + kChartHeight + 16, t);
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
std::string CategoryAreas(const std::vector<vramlab::v1::MemorySample>& samples, const Scale& scale) {
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
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(with[i]->time_seconds()), scale.Y(top[i]));
      }
      for (size_t i = with.size(); i-- > 0;) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(with[i]->time_seconds()), scale.Y(below[i]));
      }
      points.pop_back();
      absl::StrAppendFormat(&out,
                            "<polygon class=\"category-area\" data-category=\"%s\" fill=\"%s\" "
                            "fill-opacity=\"0.75\" stroke=\"none\" points=\"%s\"><title>%s</title></polygon>\n",
                            c.key, c.color, points, c.label);
    }
    below = top;
  }
  out += "</g>\n";
  return out;
}

// Legend of the phases that occur and of the two series, under the time axis.
std::string Legend(const Timeline& timeline) {
  std::set<int> phases;
  for (const auto& band : timeline.bands) phases.insert(band.phase);
  std::string out = "<g id=\"legend\" font-size=\"12\">\n";
  double x = kChartLeft;
  const double y = kChartTop + kChartHeight + 40;
  for (const auto& [label, color] : {std::pair{"allocated", kAllocatedColor},
                                     std::pair{"reserved", kReservedColor}}) {
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x, y - 4, x + 18, y - 4, color, x + 22, y, label);
    x += 100;
  }
  for (int phase : phases) {
    const auto p = static_cast<vramlab::v1::Phase>(phase);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x, y - 10, PhaseColor(p), x + 18, y, PhaseName(p));
    x += 28 + 7.5 * PhaseName(p).size();
  }
  out += "</g>\n";
  return out;
}

// `text` cut with an ellipsis to what fits `width` pixels at `char_width` pixels a character (an
// average for the sans-serif fonts the SVG names; the cut is conservative).
std::string FitToWidth(const std::string& text, double width, double char_width) {
  const size_t fits = static_cast<size_t>(width / char_width);
  if (text.size() <= fits || fits < 4) return text;
  size_t cut = fits - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return text.substr(0, cut) + "...";
}

// For a run that ran out of memory: the refused request, drawn where it would have gone — from
// what was allocated at the failure up by the request's size, at the failure's time.
std::string OomMarker(const Experiment& e, const Scale& scale) {
  if (!e.has_oom() || !e.oom().has_memory()) return "";
  const auto& oom = e.oom();
  const double x = scale.X(oom.memory().time_seconds());
  const double base = static_cast<double>(oom.memory().allocated_bytes());
  const double top_value = base + static_cast<double>(oom.requested_bytes());
  const double y_base = scale.Y(base);
  const double y_top = std::max(scale.Y(top_value), kChartTop);
  const bool beyond = scale.Y(top_value) < kChartTop;
  return absl::StrFormat(
      "<g id=\"oom-request\" data-requested-bytes=\"%d\" data-allocated-bytes=\"%d\">\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"%.1f\" fill=\"none\" stroke=\"#c00000\" "
      "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\" fill=\"#c00000\" "
      "text-anchor=\"end\">OOM: request of %s refused%s</text>\n</g>\n",
      oom.requested_bytes(), oom.memory().allocated_bytes(), x - 5, y_top, std::max(y_base - y_top, 2.0),
      x - 10, std::max(y_top + 12, kChartTop + 12), XmlEscape(FormatBytes(oom.requested_bytes())),
      beyond ? " (beyond the chart)" : "");
}

// One segment per shown component and its legend entry, left to right; `bytes_of` gives each
// component's bytes (nullopt: not part of this bar).
std::string BarSegments(const MemoryAnatomy& anatomy, int64_t total,
                        const std::function<std::optional<int64_t>(const AnatomyComponent&)>& bytes_of) {
  std::string out;
  double x = kChartLeft;
  int index = 0;
  for (const auto& c : AnatomyComponents()) {
    const std::optional<int64_t> value = bytes_of(c);
    if (!value || !IsShown(c, {&anatomy})) continue;
    const int64_t bytes = std::max<int64_t>(*value, 0);
    const double width = total > 0 ? kChartWidth * static_cast<double>(bytes) / total : 0;
    absl::StrAppendFormat(&out,
                          "<rect class=\"anatomy-segment\" data-category=\"%s\" data-bytes=\"%d\" "
                          "x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                          "<title>%s: %s</title></rect>\n",
                          c.key, bytes, x, kBarTop, width, kBarHeight, c.color, c.label,
                          XmlEscape(FormatBytes(bytes)));
    // Legend: four entries per row under the bar.
    const double lx = kChartLeft + (index % 4) * 210;
    const double ly = kBarTop + kBarHeight + 24 + (index / 4) * 20;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s %s</text>\n",
                          lx, ly - 10, c.color, lx + 16, ly, c.label, XmlEscape(FormatBytes(bytes)));
    x += width;
    ++index;
  }
  return out;
}

std::string AnatomyBar(const Experiment& e) {
  const bool measured = e.has_report();
  if (!measured && !e.has_prediction()) {
    return absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">no anatomy: %s</text>\n",
                           kChartLeft, kBarTop, XmlEscape(OutcomeSummary(e)));
  }
  const MemoryAnatomy& anatomy = measured ? e.report().anatomy() : e.prediction().anatomy();
  if (measured && anatomy.has_at_peak_allocated()) {
    // One moment: what was alive when allocated peaked; the segments sum to peak allocated.
    const auto& moment = anatomy.at_peak_allocated();
    std::string cache;
    if (anatomy.has_at_peak_reserved()) {
      cache = absl::StrCat("; cache at peak reserved ", FormatBytes(anatomy.at_peak_reserved().allocator_cache_bytes()));
    }
    std::string out = absl::StrFormat(
        "<text id=\"anatomy-title\" x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">measured "
        "anatomy at peak allocated (%s, step %d): %s%s</text>\n"
        "<g id=\"anatomy-bar\" data-kind=\"at-peak\" data-total-bytes=\"%d\">\n",
        kChartLeft, kBarTop - 8, XmlEscape(PhaseName(moment.phase())), moment.step(),
        XmlEscape(FormatBytes(moment.allocated_bytes())), XmlEscape(cache), moment.allocated_bytes());
    out += BarSegments(anatomy, moment.allocated_bytes(), [&](const AnatomyComponent& c) -> std::optional<int64_t> {
      if (c.category == nullptr) return std::nullopt;
      return c.category(moment.categories());
    });
    return out + "</g>\n";
  }
  int64_t total = 0;
  for (const auto& c : AnatomyComponents()) total += std::max<int64_t>(c.bytes(anatomy), 0);
  // The categories are each one's own maximum over the run (their peaks need not coincide), plus
  // the allocator cache and the CUDA context: the sum is said to be that, next to the peaks.
  std::string out = absl::StrFormat(
      "<text id=\"anatomy-title\" x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">%s "
      "anatomy: %s, the sum of each category's maximum; peak allocated %s, peak device used %s</text>\n"
      "<g id=\"anatomy-bar\" data-kind=\"%s\" data-total-bytes=\"%d\">\n",
      kChartLeft, kBarTop - 8, measured ? "measured" : "predicted", XmlEscape(FormatBytes(total)),
      XmlEscape(FormatBytes(anatomy.peak_allocated_bytes())),
      XmlEscape(FormatBytes(anatomy.peak_device_used_bytes())), measured ? "measured" : "predicted",
      total);
  out += BarSegments(anatomy, total, [&](const AnatomyComponent& c) -> std::optional<int64_t> { return c.bytes(anatomy); });
  return out + "</g>\n";
}

}  // namespace

const char* PhaseColor(vramlab::v1::Phase phase) {
  switch (phase) {
    case vramlab::v1::SETUP: return "#e6e6e6";
    case vramlab::v1::LOAD: return "#d0d0d0";
    case vramlab::v1::FORWARD: return "#c6dbef";
    case vramlab::v1::BACKWARD: return "#fdd0a2";
    case vramlab::v1::OPTIMIZER_STEP: return "#c7e9c0";
    case vramlab::v1::ZERO_GRAD: return "#fcbba1";
    case vramlab::v1::TEARDOWN: return "#dadaeb";
    default: return "#f0f0f0";
  }
}

std::string XmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
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
  int64_t y_max = std::max<int64_t>(data_max, 1024);
  for (int64_t reference : {limit, predicted}) {
    if (reference > 0 && reference <= 2 * std::max<int64_t>(data_max, 1)) {
      y_max = std::max(y_max, reference);
    }
  }
  const Scale scale{timeline.end_seconds, static_cast<double>(y_max) * 1.08};

  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
      "%.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      kWidth, kHeight, kWidth, kHeight);
  const std::string title = absl::StrCat(e.id(), e.spec().name().empty() ? "" : "  ", e.spec().name());
  // The outcome has a line of its own, and each line is cut to the width it is drawn in (the full
  // text stays in the tooltip).
  const std::string heading = FitToWidth(title, kWidth - kChartLeft - 20, 17 * 0.62);
  const std::string outcome = FitToWidth(OutcomeSummary(e), kWidth - kChartLeft - 20, 12 * 0.56);
  const std::string settings = FitToWidth(SpecSummary(e.spec()), kWidth - kChartLeft - 20, 11 * 0.56);
  absl::StrAppendFormat(&out,
                        "<title>%s  %s</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
                        "<text id=\"title\" x=\"%.1f\" y=\"24\" font-size=\"17\" font-weight=\"bold\">%s</text>\n"
                        "<text id=\"outcome\" x=\"%.1f\" y=\"42\" font-size=\"12\">%s</text>\n"
                        "<text id=\"settings\" x=\"%.1f\" y=\"57\" font-size=\"11\" fill=\"#555\">%s</text>\n",
                        XmlEscape(title), XmlEscape(OutcomeSummary(e)), kChartLeft, XmlEscape(heading),
                        kChartLeft, XmlEscape(outcome), kChartLeft, XmlEscape(settings));
  out += PhaseBands(timeline, scale);
  out += CategoryAreas(Downsample(timeline.samples, 800), scale);
  out += Axes(scale);
  out += Polyline("series-reserved", "reserved", kReservedColor, Downsample(timeline.samples, 800),
                  scale, true);
  out += Polyline("series-allocated", "allocated", kAllocatedColor,
                  Downsample(timeline.samples, 800), scale, false);
  if (limit > 0 && limit <= y_max) {
    out += ReferenceLine("limit-line", limit, absl::StrCat("limit ", FormatBytes(limit)), "#c00000",
                         scale);
  } else if (limit > 0) {
    // Far above the data: named in a corner rather than squashing the lines flat.
    absl::StrAppendFormat(&out,
                          "<text id=\"limit-note\" data-bytes=\"%d\" x=\"%.1f\" y=\"%.1f\" "
                          "font-size=\"11\" text-anchor=\"end\" fill=\"#c00000\">limit %s (above "
                          "the chart)</text>\n",
                          limit, kChartLeft + kChartWidth, kChartTop - 6, XmlEscape(FormatBytes(limit)));
  }
  if (predicted > 0 && predicted <= y_max) {
    out += ReferenceLine("predicted-peak-line", predicted,
                         absl::StrCat("predicted peak ", FormatBytes(predicted)), "#666666", scale);
  }
  if (timeline.peak_index >= 0) {
    const auto& peak = timeline.samples[timeline.peak_index];
    const double x = scale.X(peak.time_seconds());
    const double y = scale.Y(static_cast<double>(peak.allocated_bytes()));
    absl::StrAppendFormat(
        &out,
        "<circle id=\"peak-marker\" data-bytes=\"%d\" data-time=\"%.3f\" cx=\"%.1f\" cy=\"%.1f\" "
        "r=\"5\" fill=\"#c00000\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\" fill=\"#c00000\" "
        "text-anchor=\"%s\">peak %s (%s)</text>\n",
        peak.allocated_bytes(), peak.time_seconds(), x, y, x > kChartLeft + kChartWidth / 2 ? x - 8 : x + 8,
        std::max(y - 8, kChartTop + 12), x > kChartLeft + kChartWidth / 2 ? "end" : "start",
        XmlEscape(FormatBytes(peak.allocated_bytes())), XmlEscape(PhaseName(peak.phase())));
  } else {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">no memory readings recorded</text>\n",
                          kChartLeft + 20, kChartTop + kChartHeight / 2);
  }
  out += OomMarker(e, scale);
  out += Legend(timeline);
  out += AnatomyBar(e);
  out += "</svg>\n";
  return out;
}

}  // namespace vramlab::client
