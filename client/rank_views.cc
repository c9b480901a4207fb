#include "client/rank_views.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/text_table.h"

namespace vramlab::client {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;
using vramlab::v1::RankResult;

bool IsParallel(const Experiment& e) {
  return e.spec().parallel().world_size() >= 2 || e.slots_size() > 1 || e.ranks_size() > 0;
}

int WorldSize(const Experiment& e) {
  int world = std::max({1, e.spec().parallel().world_size(), e.slots_size()});
  for (const RankResult& r : e.ranks()) world = std::max(world, r.rank() + 1);
  return world;
}

std::string WorldAndSlots(const Experiment& e) {
  return absl::StrCat(WorldSize(e), "×[", e.slots().empty() ? "-" : absl::StrJoin(e.slots(), ","),
                      "]");
}

std::string ShardingName(const vramlab::v1::ParallelSpec& parallel) {
  switch (parallel.sharding()) {
    case vramlab::v1::SHARD_OPTIMIZER:
      return "optimizer";
    case vramlab::v1::SHARD_GRADIENTS:
      return "gradients";
    case vramlab::v1::SHARD_FULL:
      return absl::StrCat("full", parallel.reshard_after_forward() ? "+reshard" : "",
                          parallel.has_prefetch() && !parallel.prefetch() ? "+noprefetch" : "");
    default:
      return "none";
  }
}

const std::vector<RankRow>& RankRows() {
  static const auto* rows = new std::vector<RankRow>{
      {"peak allocated", [](const MemoryAnatomy& a) { return a.peak_allocated_bytes(); }},
      {"peak reserved", [](const MemoryAnatomy& a) { return a.peak_reserved_bytes(); }},
      {"weights", [](const MemoryAnatomy& a) { return a.weights_bytes(); }},
      {"gradients", [](const MemoryAnatomy& a) { return a.gradients_bytes(); }},
      {"optimizer state", [](const MemoryAnatomy& a) { return a.optimizer_state_bytes(); }},
      {"activations", [](const MemoryAnatomy& a) { return a.activations_bytes(); }},
      {"gathered parameters", [](const MemoryAnatomy& a) { return a.gathered_parameters_bytes(); }},
      {"communication buffers",
       [](const MemoryAnatomy& a) { return a.communication_buffers_bytes(); }},
      {"outside the allocator", [](const MemoryAnatomy& a) { return a.cuda_context_bytes(); }},
  };
  return *rows;
}

std::optional<int64_t> RankBytes(const RankResult& rank, const std::string& label,
                                 const AnatomyBytes& bytes) {
  if (rank.has_report()) return bytes(rank.report().anatomy());
  if (rank.has_oom() && rank.oom().has_memory()) {
    if (label == "peak allocated") return rank.oom().memory().peak_allocated_bytes();
    if (label == "peak reserved") return rank.oom().memory().peak_reserved_bytes();
  }
  return std::nullopt;
}

std::optional<int64_t> MaxOverRanks(const Experiment& e, const std::string& label,
                                    const AnatomyBytes& bytes) {
  std::optional<int64_t> max;
  for (const RankResult& rank : e.ranks()) {
    const std::optional<int64_t> value = RankBytes(rank, label, bytes);
    if (value && (!max || *value > *max)) max = value;
  }
  return max;
}

const RankResult* PeakRank(const Experiment& e) {
  const RankResult* peak = nullptr;
  for (const RankResult& rank : e.ranks()) {
    if (!rank.has_report()) continue;
    if (peak == nullptr || rank.report().anatomy().peak_allocated_bytes() >
                               peak->report().anatomy().peak_allocated_bytes()) {
      peak = &rank;
    }
  }
  return peak;
}

std::string RankOutcome(const RankResult& rank) {
  if (rank.has_oom()) {
    return absl::StrCat("OOM in ", PhaseName(rank.oom().phase()), " (step ", rank.oom().step(),
                        ", micro-step ", rank.oom().micro_step(), ")");
  }
  if (!rank.state_reason().empty()) return rank.state_reason();
  if (rank.has_report()) return "fits";
  if (rank.worker_exit_status() < 0) {
    return absl::StrCat("worker killed by signal ", -rank.worker_exit_status());
  }
  if (rank.worker_exit_status() > 0) {
    return absl::StrCat("worker exited with status ", rank.worker_exit_status());
  }
  return "-";
}

namespace {

const RankResult* FindRank(const Experiment& e, int rank) {
  for (const RankResult& r : e.ranks()) {
    if (r.rank() == rank) return &r;
  }
  return nullptr;
}

std::string SlotOf(const Experiment& e, int rank) {
  if (const RankResult* r = FindRank(e, rank)) return absl::StrCat(r->slot());
  if (rank < e.slots_size()) return absl::StrCat(e.slots(rank));
  return "-";
}

// A rank's result in one word: its outcome in full stands under the table.
std::string RankResultWord(const Experiment& e, int rank) {
  const RankResult* r = FindRank(e, rank);
  if (r == nullptr) return e.state() == Experiment::RUNNING ? "running" : "-";
  if (r->has_oom()) return "OOM";
  if (r->has_report()) return "fits";
  return "ended";
}

// The per-rank prediction of `label`: ParallelEstimate's anatomy, with the gathered parameters
// and communication buffer its own fields give.
std::optional<int64_t> PredictedPerRank(const Experiment& e, const RankRow& row) {
  if (!e.prediction().has_parallel()) return std::nullopt;
  const vramlab::v1::ParallelEstimate& p = e.prediction().parallel();
  const std::string label = row.label;
  if (label == "gathered parameters") {
    return std::max(p.gathered_parameters_bytes(), row.bytes(p.anatomy()));
  }
  if (label == "communication buffers") {
    return std::max(p.communication_buffer_bytes(), row.bytes(p.anatomy()));
  }
  return row.bytes(p.anatomy());
}

std::string Cell(const std::optional<int64_t>& bytes) { return bytes ? FormatBytes(*bytes) : "-"; }

}  // namespace

std::string DecidingRankLine(const Experiment& e) {
  if (!e.has_deciding_rank()) return "";
  const int rank = e.deciding_rank();
  const RankResult* r = FindRank(e, rank);
  std::string reason = r != nullptr ? RankOutcome(*r) : "-";
  if (reason == "-" && !e.state_reason().empty()) reason = e.state_reason();
  return absl::StrCat("deciding rank: ", rank, " on slot ", SlotOf(e, rank), ": ", reason, "\n");
}

std::string RankSectionTitle(const Experiment& e) {
  return absl::StrCat("ranks: world size ", WorldSize(e), ", sharding ",
                      ShardingName(e.spec().parallel()), ", slots ", WorldAndSlots(e));
}

RankTable BuildRankTable(const Experiment& e) {
  RankTable table;
  const int world = WorldSize(e);
  table.header = {"per rank"};
  for (int r = 0; r < world; ++r) table.header.push_back(absl::StrCat("rank ", r));
  table.header.push_back("sum over ranks");
  table.header.push_back("max per rank");
  const bool predicted = e.prediction().has_parallel();
  if (predicted) table.header.push_back("predicted per rank");
  std::vector<std::string> slots = {"slot"}, results = {"result"};
  for (int r = 0; r < world; ++r) {
    slots.push_back(SlotOf(e, r));
    results.push_back(RankResultWord(e, r));
  }
  table.rows.push_back(slots);
  table.rows.push_back(results);
  bool partial_sum = false;
  for (const RankRow& row : RankRows()) {
    std::vector<std::string> cells = {row.label};
    int64_t sum = 0;
    int known = 0;
    for (int r = 0; r < world; ++r) {
      const RankResult* rank = FindRank(e, r);
      const std::optional<int64_t> value =
          rank != nullptr ? RankBytes(*rank, row.label, row.bytes) : std::nullopt;
      cells.push_back(Cell(value));
      if (value) {
        sum += *value;
        ++known;
      }
    }
    // A sum that misses ranks is a lower bound, marked as one.
    if (known == 0) {
      cells.push_back("-");
    } else if (known < world) {
      cells.push_back(absl::StrCat("≥ ", FormatBytes(sum)));
      partial_sum = true;
    } else {
      cells.push_back(FormatBytes(sum));
    }
    cells.push_back(Cell(MaxOverRanks(e, row.label, row.bytes)));
    if (predicted) cells.push_back(Cell(PredictedPerRank(e, row)));
    table.rows.push_back(cells);
  }
  if (partial_sum) {
    table.notes.push_back("≥: the sum over the ranks that tell it; the others ended first.");
  }
  for (int r = 0; r < world; ++r) {
    const RankResult* rank = FindRank(e, r);
    // The deciding rank's outcome has its own line.
    if (rank == nullptr || (rank->has_report() && !rank->has_oom())) continue;
    if (e.has_deciding_rank() && e.deciding_rank() == r) continue;
    table.notes.push_back(
        absl::StrCat("rank ", r, " on slot ", rank->slot(), ": ", RankOutcome(*rank)));
  }
  std::string deciding = DecidingRankLine(e);
  if (!deciding.empty()) {
    deciding.pop_back();  // the line's '\n'
    table.notes.push_back(deciding);
  }
  return table;
}

std::string RenderRankSection(const Experiment& e) {
  if (!IsParallel(e)) return "";
  const RankTable rank_table = BuildRankTable(e);
  std::vector<TextTable::Align> aligns(rank_table.header.size(), TextTable::Align::kRight);
  aligns[0] = TextTable::Align::kLeft;
  TextTable table(rank_table.header, aligns);
  for (const auto& row : rank_table.rows) table.AddRow(row);
  std::string out = absl::StrCat("\n", RankSectionTitle(e), "\n", table.Render());
  for (const std::string& note : rank_table.notes) absl::StrAppend(&out, note, "\n");
  return out;
}

}  // namespace vramlab::client
