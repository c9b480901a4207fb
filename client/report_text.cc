// Text and CSV reports.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/experiment_details.h"
#include "client/report_formats.h"

namespace vramlab::client {
namespace {

constexpr int kColumns = 72;
constexpr int kRows = 12;

char PhaseLetter(vramlab::v1::Phase phase) {
  switch (phase) {
    case vramlab::v1::SETUP:
      return 's';
    case vramlab::v1::LOAD:
      return 'L';
    case vramlab::v1::FORWARD:
      return 'F';
    case vramlab::v1::BACKWARD:
      return 'B';
    case vramlab::v1::OPTIMIZER_STEP:
      return 'O';
    case vramlab::v1::ZERO_GRAD:
      return 'Z';
    case vramlab::v1::TEARDOWN:
      return 't';
    default:
      return ' ';
  }
}

std::string Chart(const Timeline& timeline) {
  if (timeline.samples.empty()) return "(no memory readings recorded)\n";
  std::vector<int64_t> allocated(kColumns, 0), reserved(kColumns, 0);
  std::vector<bool> filled(kColumns, false);
  const double span = std::max(timeline.end_seconds, 1e-9);
  const auto column_of = [&](double t) {
    return std::clamp(static_cast<int>(t / span * (kColumns - 1) + 0.5), 0, kColumns - 1);
  };
  int64_t max_bytes = 1;
  for (const auto& s : timeline.samples) {
    const int c = column_of(s.time_seconds());
    allocated[c] = std::max(allocated[c], s.allocated_bytes());
    reserved[c] = std::max(reserved[c], s.reserved_bytes());
    filled[c] = true;
    max_bytes = std::max({max_bytes, s.allocated_bytes(), s.reserved_bytes()});
  }
  // Columns without a reading repeat the previous one: memory holds between samples.
  for (int c = 1; c < kColumns; ++c) {
    if (!filled[c]) {
      allocated[c] = allocated[c - 1];
      reserved[c] = reserved[c - 1];
    }
  }
  const int peak_column = column_of(timeline.samples[timeline.peak_index].time_seconds());
  std::string out;
  const std::string top_label = FormatBytes(max_bytes);
  const int label_width = static_cast<int>(std::max<size_t>(top_label.size(), 5));
  for (int row = kRows; row >= 1; --row) {
    const double level = static_cast<double>(max_bytes) * (row - 0.5) / kRows;
    std::string label = row == kRows             ? top_label
                        : row == (kRows + 1) / 2 ? FormatBytes(max_bytes / 2)
                                                 : "";
    std::string line = absl::StrFormat("%*s |", label_width, label);
    for (int c = 0; c < kColumns; ++c) {
      char cell = ' ';
      if (allocated[c] >= level) {
        cell = '#';
      } else if (reserved[c] >= level) {
        cell = '.';
      }
      if (c == peak_column && row == kRows && cell == ' ') cell = '*';
      line += cell;
    }
    out += line + "\n";
  }
  std::string phases(kColumns, ' ');
  for (const auto& band : timeline.bands) {
    for (int c = column_of(band.start_seconds); c <= column_of(band.end_seconds); ++c) {
      phases[c] = PhaseLetter(band.phase);
    }
  }
  absl::StrAppendFormat(&out, "%*s +%s\n", label_width, "0 B", std::string(kColumns, '-'));
  absl::StrAppendFormat(&out, "%*s  %s\n", label_width, "phase", phases);
  absl::StrAppendFormat(&out, "%*s  0 s%*s\n", label_width, "", kColumns - 3,
                        absl::StrFormat("%.2f s", timeline.end_seconds));
  absl::StrAppend(
      &out,
      "# allocated  . reserved above allocated  * peak column  phases: s setup, L load, "
      "F forward, B backward, O optimizer step, Z zero_grad, t teardown\n");
  return out;
}

}  // namespace

std::string RenderTextReport(const vramlab::v1::Experiment& experiment, const Timeline& timeline) {
  std::string out = absl::StrCat(experiment.id(), "  ",
                                 experiment.spec().name().empty() ? "-" : experiment.spec().name(),
                                 "\nsettings: ", SpecSummary(experiment.spec()), "\n");
  if (timeline.peak_index >= 0) {
    const auto& peak = timeline.samples[timeline.peak_index];
    absl::StrAppendFormat(&out, "sampled peak: %s allocated at %.3f s (%s, step %d), %d readings\n",
                          FormatBytes(peak.allocated_bytes()), peak.time_seconds(),
                          PhaseName(peak.phase()), peak.step(), timeline.samples.size());
  }
  absl::StrAppend(&out, "\n", Chart(timeline), "\n", RenderOutcome(experiment));
  return out;
}

std::string RenderCsvReport(const Timeline& timeline) {
  std::string out =
      "time_seconds,allocated_bytes,reserved_bytes,active_bytes,peak_allocated_bytes,"
      "fragmentation_ratio,phase,step,micro_step,sweep_index\n";
  for (const auto& s : timeline.samples) {
    absl::StrAppendFormat(
        &out, "%.6f,%d,%d,%d,%d,%.6f,%s,%d,%d,%d\n", s.time_seconds(), s.allocated_bytes(),
        s.reserved_bytes(), s.active_bytes(), s.peak_allocated_bytes(), s.fragmentation_ratio(),
        vramlab::v1::Phase_Name(s.phase()), s.step(), s.micro_step(), s.sweep_index());
  }
  return out;
}

}  // namespace vramlab::client
