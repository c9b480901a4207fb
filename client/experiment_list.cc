#include "client/experiment_list.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/rank_views.h"
#include "client/text_table.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;

std::string PeakColumn(const Experiment& e) {
  if (e.ranks_size() > 0) {
    const RankRow& peak = RankRows().front();  // peak allocated
    const std::optional<int64_t> max = MaxOverRanks(e, peak.label, peak.bytes);
    if (max) return absl::StrCat(FormatBytes(*max), e.state() == Experiment::OOM ? " (OOM)" : "");
  }
  if (e.has_report()) return FormatBytes(e.report().anatomy().peak_allocated_bytes());
  if (e.has_oom() && e.oom().has_memory()) {
    return absl::StrCat(FormatBytes(e.oom().memory().peak_allocated_bytes()), " (OOM)");
  }
  return "-";
}

}  // namespace

std::string RenderExperimentList(const vramlab::v1::ListExperimentsResponse& all) {
  using Align = TextTable::Align;
  const bool ranks = std::any_of(all.experiments().begin(), all.experiments().end(),
                                 [](const Experiment& e) { return IsParallel(e); });
  std::vector<std::string> headers = {"ID", "OWNER", "STATE", "NAME", "SETTINGS"};
  std::vector<Align> aligns(headers.size(), Align::kLeft);
  if (ranks) {
    headers.push_back("RANKS");
    aligns.push_back(Align::kLeft);
  }
  headers.insert(headers.end(), {"PEAK", "QUEUE"});
  aligns.insert(aligns.end(), {Align::kRight, Align::kRight});
  // The start estimate, where something is queued.
  const bool queued =
      std::any_of(all.experiments().begin(), all.experiments().end(),
                  [](const Experiment& e) { return e.state() == Experiment::QUEUED; });
  if (queued) {
    headers.push_back("STARTS");
    aligns.push_back(Align::kLeft);
  }
  const absl::Time now = absl::Now();
  TextTable table(headers, aligns);
  for (const auto& e : all.experiments()) {
    std::vector<std::string> row = {e.id(), e.owner(), StateName(e.state()),
                                    e.spec().name().empty() ? "-" : e.spec().name(),
                                    SpecSummary(e.spec())};
    if (ranks) row.push_back(IsParallel(e) ? WorldAndSlots(e) : "-");
    row.push_back(PeakColumn(e));
    row.push_back(e.state() == Experiment::QUEUED ? absl::StrCat(e.queue_position()) : "");
    if (queued) {
      row.push_back(e.state() != Experiment::QUEUED ? ""
                    : !e.after_id().empty() && !e.held()
                        ? absl::StrCat(StartEstimateText(e, now), " (after ", e.after_id(), ")")
                        : StartEstimateText(e, now));
    }
    table.AddRow(row);
  }
  std::string out = table.Render();
  if (!all.next_page_token().empty()) out += "(more: raise --limit, or --limit 0 for all)\n";
  return out;
}

}  // namespace vramlab::client
