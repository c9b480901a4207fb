// JSON and HTML reports.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/command_env.h"
#include "client/describe.h"
#include "client/experiment_details.h"
#include "client/rank_views.h"
#include "client/report_formats.h"
#include "client/report_svg.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

// MessageToJson without the trailing newline, for embedding.
std::string Embedded(const google::protobuf::Message& message) {
  std::string json = MessageToJson(message, false);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

std::string Row(const std::vector<std::string>& cells, const char* tag = "td") {
  std::string out = "<tr>";
  for (const auto& cell : cells)
    absl::StrAppend(&out, "<", tag, ">", XmlEscape(cell), "</", tag, ">");
  return out + "</tr>\n";
}

std::string AnatomyHtml(const Experiment& e) {
  const MemoryAnatomy* measured = e.has_report() ? &e.report().anatomy() : nullptr;
  // A parallel run's report is rank 0's, next to the prediction for one rank.
  const bool per_rank = IsParallel(e) && e.prediction().has_parallel();
  const MemoryAnatomy* predicted = !e.has_prediction() ? nullptr
                                   : per_rank          ? &e.prediction().parallel().anatomy()
                                                       : &e.prediction().anatomy();
  if (measured == nullptr && predicted == nullptr) return "";
  std::string out =
      absl::StrCat("<h2>Memory anatomy", measured != nullptr && IsParallel(e) ? " of rank 0" : "",
                   per_rank ? ", predicted per rank" : "", "</h2>\n<table class=\"anatomy\">\n");
  const bool at_peak = measured != nullptr && measured->has_at_peak_allocated();
  std::vector<std::string> header = {"category"};
  if (at_peak) header.push_back("at peak allocated");
  if (measured) header.push_back(at_peak ? "max over run" : "measured");
  if (predicted) header.push_back("predicted");
  if (measured && predicted) header.push_back("measured − predicted");
  out += Row(header, "th");
  for (const auto& c : AnatomyComponents()) {
    if (!IsShown(c, {measured, predicted})) continue;
    std::vector<std::string> cells = {c.label};
    if (at_peak) {
      const std::optional<int64_t> value = AtPeakBytes(c, *measured);
      cells.push_back(value ? FormatBytes(*value) : "-");
    }
    if (measured) cells.push_back(FormatBytes(c.bytes(*measured)));
    if (predicted) cells.push_back(FormatBytes(c.bytes(*predicted)));
    if (measured && predicted)
      cells.push_back(FormatBytesDelta(c.bytes(*measured) - c.bytes(*predicted)));
    absl::StrAppend(&out, "<tr><td><span class=\"swatch\" style=\"background:", c.color,
                    "\"></span>", XmlEscape(cells[0]), "</td>");
    for (size_t i = 1; i < cells.size(); ++i)
      absl::StrAppend(&out, "<td>", XmlEscape(cells[i]), "</td>");
    out += "</tr>\n";
  }
  for (const auto& [label, bytes] :
       {std::pair{"peak allocated", &MemoryAnatomy::peak_allocated_bytes},
        std::pair{"peak reserved", &MemoryAnatomy::peak_reserved_bytes}}) {
    std::vector<std::string> cells = {label};
    if (at_peak) {
      const bool allocated = std::string(label) == "peak allocated";
      if (allocated) {
        cells.push_back(FormatBytes(measured->at_peak_allocated().allocated_bytes()));
      } else {
        cells.push_back(measured->has_at_peak_reserved()
                            ? FormatBytes(measured->at_peak_reserved().reserved_bytes())
                            : "-");
      }
    }
    if (measured) cells.push_back(FormatBytes((measured->*bytes)()));
    if (predicted) cells.push_back(FormatBytes((predicted->*bytes)()));
    if (measured && predicted) {
      cells.push_back(FormatBytesDelta((measured->*bytes)() - (predicted->*bytes)()));
    }
    out += Row(cells);
  }
  if (measured)
    out += Row({"fragmentation at peak", FormatPercent(measured->fragmentation_ratio())});
  out += "</table>\n";
  if (measured != nullptr) {
    const std::string note = PeakMomentNote(*measured);
    if (!note.empty())
      absl::StrAppend(&out, "<p class=\"peak-moments\">", XmlEscape(note), "</p>\n");
  }
  return out;
}

// The per-rank table of a parallel run (BuildRankTable), with its notes; empty otherwise.
std::string RanksHtml(const Experiment& e) {
  if (!IsParallel(e)) return "";
  const RankTable table = BuildRankTable(e);
  std::string out =
      absl::StrCat("<h2>Ranks</h2>\n<div class=\"settings\">", XmlEscape(RankSectionTitle(e)),
                   "</div>\n<table class=\"ranks\">\n", Row(table.header, "th"));
  for (const auto& row : table.rows) out += Row(row);
  out += "</table>\n";
  for (const std::string& note : table.notes)
    absl::StrAppend(&out, "<p>", XmlEscape(note), "</p>\n");
  return out;
}

}  // namespace

std::string RenderJsonReport(const Experiment& e, const Timeline& timeline) {
  std::vector<std::string> samples;
  samples.reserve(timeline.samples.size());
  for (const auto& s : timeline.samples) samples.push_back(Embedded(s));
  std::vector<std::string> phases;
  for (const auto& b : timeline.bands) {
    phases.push_back(
        absl::StrFormat("{\"phase\":\"%s\",\"startSeconds\":%.6f,\"endSeconds\":%.6f,\"step\":%d,"
                        "\"microStep\":%d,\"sweepIndex\":%d}",
                        vramlab::v1::Phase_Name(b.phase), b.start_seconds, b.end_seconds, b.step,
                        b.micro_step, b.sweep_index));
  }
  std::string out = absl::StrCat("{\"experiment\":", Embedded(e), ",\n\"samples\":[",
                                 absl::StrJoin(samples, ",\n"), "],\n\"phases\":[",
                                 absl::StrJoin(phases, ",\n"), "]");
  if (timeline.peak_index >= 0) {
    absl::StrAppend(&out, ",\n\"peak\":", Embedded(timeline.samples[timeline.peak_index]));
  }
  out += "}\n";
  return out;
}

std::string RenderHtmlReport(const Experiment& e, const Timeline& timeline) {
  const std::string title =
      absl::StrCat("vramlab report: ", e.id(), e.spec().name().empty() ? "" : " ", e.spec().name());
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n<title>",
      XmlEscape(title), "</title>\n<style>\n",
      "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;"
      "background:#fff}\n"
      "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}\n"
      ".settings{color:#555;margin-bottom:16px}\n"
      "table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ccc;padding:4px 10px;"
      "text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f2f2f2}\n"
      ".swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}"
      "\n"
      ".outcome-OOM{color:#c00000;font-weight:bold}.outcome-SUCCEEDED{color:#1a7f37;"
      "font-weight:bold}\npre{background:#f6f6f6;padding:8px;white-space:pre-wrap}\n"
      "</style>\n</head>\n<body>\n");
  absl::StrAppend(&out, "<h1>", XmlEscape(title), "</h1>\n<div class=\"settings\">",
                  XmlEscape(SpecSummary(e.spec())), "</div>\n");
  absl::StrAppend(&out, "<table class=\"summary\">\n", Row({"owner", e.owner()}),
                  "<tr><td>outcome</td><td class=\"outcome-", StateName(e.state()), "\">",
                  XmlEscape(OutcomeSummary(e)), "</td></tr>\n",
                  Row({"created", FormatTimestamp(e.create_time())}));
  if (e.has_report()) {
    const auto& r = e.report();
    absl::StrAppend(
        &out, Row({"device", r.device_name()}),
        Row({"parameters", absl::StrCat(r.parameter_count())}),
        Row({"attention", r.attention_backend()}),
        Row({"step time", StepTimeSummary(r.median_step_time_seconds(), r.steady_steps(),
                                          r.warmup_steps(), r.warmup_step_time_seconds())}),
        Row({"tokens/s",
             TokensPerSecondSummary(r.tokens_per_second(), r.steady_steps(), r.warmup_steps())}),
        Row({"final loss", absl::StrFormat("%.4f", r.final_loss())}));
  }
  out += "</table>\n<h2>Memory over time</h2>\n";
  out += RenderSvg(e, timeline);
  out += AnatomyHtml(e);
  out += RanksHtml(e);
  const std::string sweep = RenderSweepTable(e);
  if (!sweep.empty()) absl::StrAppend(&out, "<h2>Sweep</h2>\n<pre>", XmlEscape(sweep), "</pre>\n");
  if (e.has_oom() && !e.oom().message().empty()) {
    absl::StrAppend(&out, "<h2>Out of memory</h2>\n<pre>", XmlEscape(e.oom().message()),
                    "</pre>\n");
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace vramlab::client
