#include "client/anatomy_table.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/rank_views.h"
#include "client/text_table.h"

namespace vramlab::client {

using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

const std::vector<AnatomyComponent>& AnatomyComponents() {
  using C = vramlab::v1::CategoryBytes;
  static const auto* components = new std::vector<AnatomyComponent>{
      {"weights", "weights", "#4e79a7", [](const MemoryAnatomy& a) { return a.weights_bytes(); },
       false, [](const C& c) { return c.weights_bytes(); }},
      // With an adapter, "weights" is the frozen base; the trained adapters and the NF4
      // quantisation constants are their own categories (0 for full fine-tuning).
      {"adapter weights", "adapter_weights", "#9c755f",
       [](const MemoryAnatomy& a) { return a.adapter_weights_bytes(); }, true,
       [](const C& c) { return c.adapter_weights_bytes(); }},
      {"quantization constants", "quantization_constants", "#bab0ac",
       [](const MemoryAnatomy& a) { return a.quantization_constants_bytes(); }, true,
       [](const C& c) { return c.quantization_constants_bytes(); }},
      {"gradients", "gradients", "#f28e2b",
       [](const MemoryAnatomy& a) { return a.gradients_bytes(); }, false,
       [](const C& c) { return c.gradients_bytes(); }},
      {"optimizer state", "optimizer_state", "#e15759",
       [](const MemoryAnatomy& a) { return a.optimizer_state_bytes(); }, false,
       [](const C& c) { return c.optimizer_state_bytes(); }},
      {"activations", "activations", "#76b7b2",
       [](const MemoryAnatomy& a) { return a.activations_bytes(); }, false,
       [](const C& c) { return c.activations_bytes(); }},
      {"temporary buffers", "temporary_buffers", "#59a14f",
       [](const MemoryAnatomy& a) { return a.temporary_buffers_bytes(); }, false,
       [](const C& c) { return c.temporaries_bytes(); }},
      {"allocator cache", "allocator_cache", "#edc948",
       [](const MemoryAnatomy& a) { return a.allocator_cache_bytes(); }},
      {"CUDA context", "cuda_context", "#b07aa1",
       [](const MemoryAnatomy& a) { return a.cuda_context_bytes(); }},
  };
  return *components;
}

std::optional<int64_t> AtPeakBytes(const AnatomyComponent& component,
                                   const MemoryAnatomy& anatomy) {
  if (component.category != nullptr) {
    if (!anatomy.has_at_peak_allocated()) return std::nullopt;
    return component.category(anatomy.at_peak_allocated().categories());
  }
  if (std::string(component.key) == "allocator_cache" && anatomy.has_at_peak_reserved()) {
    return anatomy.at_peak_reserved().allocator_cache_bytes();
  }
  return std::nullopt;
}

std::string PeakMomentNote(const MemoryAnatomy& a) {
  std::string out;
  if (a.has_at_peak_allocated()) {
    const auto& m = a.at_peak_allocated();
    absl::StrAppend(&out, "at peak allocated: what was alive when allocated peaked (",
                    PhaseName(m.phase()), ", step ", m.step(), ", micro-step ", m.micro_step(),
                    "); its categories sum to ", FormatBytes(m.allocated_bytes()), ".\n");
  }
  if (a.has_at_peak_reserved()) {
    const auto& r = a.at_peak_reserved();
    absl::StrAppend(&out, "allocator cache at peak reserved (", PhaseName(r.phase()), ", step ",
                    r.step(), ", micro-step ", r.micro_step(),
                    "): ", FormatBytes(r.reserved_bytes()),
                    " reserved = ", FormatBytes(r.allocated_bytes()), " allocated + ",
                    FormatBytes(r.allocator_cache_bytes()), " cache.\n");
  }
  if (!out.empty())
    out += "max over run: each category's own largest value; they need not coincide.\n";
  return out;
}

bool IsShown(const AnatomyComponent& component, const std::vector<const MemoryAnatomy*>& shown) {
  if (!component.adapter_only) return true;
  for (const MemoryAnatomy* anatomy : shown) {
    if (anatomy != nullptr && component.bytes(*anatomy) != 0) return true;
  }
  return false;
}

namespace {

struct Total {
  const char* label;
  int64_t (*bytes)(const MemoryAnatomy&);
  std::optional<int64_t> (*at_peak)(const MemoryAnatomy&);
};

const Total kTotals[] = {
    {"peak allocated", [](const MemoryAnatomy& a) { return a.peak_allocated_bytes(); },
     [](const MemoryAnatomy& a) -> std::optional<int64_t> {
       if (!a.has_at_peak_allocated()) return std::nullopt;
       return a.at_peak_allocated().allocated_bytes();
     }},
    {"peak reserved", [](const MemoryAnatomy& a) { return a.peak_reserved_bytes(); },
     [](const MemoryAnatomy& a) -> std::optional<int64_t> {
       if (!a.has_at_peak_reserved()) return std::nullopt;
       return a.at_peak_reserved().reserved_bytes();
     }},
    {"peak device used", [](const MemoryAnatomy& a) { return a.peak_device_used_bytes(); },
     [](const MemoryAnatomy&) -> std::optional<int64_t> { return std::nullopt; }},
};

struct ByteRow {
  std::string label;
  std::function<int64_t(const MemoryAnatomy&)> bytes;                   // max over run
  std::function<std::optional<int64_t>(const MemoryAnatomy&)> at_peak;  // at the peak moments
};

// Every byte row (components then totals); the adapter categories only when one of `shown` has
// them.
std::vector<ByteRow> ByteRows(const std::vector<const MemoryAnatomy*>& shown) {
  std::vector<ByteRow> rows;
  for (const auto& c : AnatomyComponents()) {
    if (IsShown(c, shown)) {
      rows.push_back(
          {c.label, c.bytes, [&c](const MemoryAnatomy& a) { return AtPeakBytes(c, a); }});
    }
  }
  for (const auto& t : kTotals) rows.push_back({t.label, t.bytes, t.at_peak});
  return rows;
}

// ByteRows, and with a parallel run among those compared, its two rows before the totals:
// gathered parameters and communication buffers (no categories at the peak moments).
std::vector<ByteRow> CompareRows(const std::vector<const MemoryAnatomy*>& shown, bool parallel) {
  std::vector<ByteRow> rows = ByteRows(shown);
  if (!parallel) return rows;
  const auto none = [](const MemoryAnatomy&) -> std::optional<int64_t> { return std::nullopt; };
  const auto totals = rows.end() - std::size(kTotals);
  rows.insert(totals,
              {{"gathered parameters",
                [](const MemoryAnatomy& a) { return a.gathered_parameters_bytes(); }, none},
               {"communication buffers",
                [](const MemoryAnatomy& a) { return a.communication_buffers_bytes(); }, none}});
  return rows;
}

std::string Ratio(double numerator, double denominator) {
  if (denominator <= 0 || numerator <= 0) return "-";
  return absl::StrFormat("x%.2f", numerator / denominator);
}

}  // namespace

std::string RenderAnatomyTable(const MemoryAnatomy* measured, const MemoryAnatomy* predicted) {
  using Align = TextTable::Align;
  std::vector<std::string> headers = {"category"};
  std::vector<Align> aligns = {Align::kLeft};
  const bool at_peak = measured != nullptr && measured->has_at_peak_allocated();
  if (at_peak) headers.push_back("at peak allocated");
  if (measured != nullptr) headers.push_back(at_peak ? "max over run" : "measured");
  if (predicted != nullptr) headers.push_back("predicted");
  if (measured != nullptr && predicted != nullptr) headers.push_back("measured-predicted");
  aligns.resize(headers.size(), Align::kRight);
  TextTable table(headers, aligns);
  for (const auto& [label, bytes, at_peak_bytes] : ByteRows({measured, predicted})) {
    std::vector<std::string> row = {label};
    if (at_peak) {
      const std::optional<int64_t> value = at_peak_bytes(*measured);
      row.push_back(value ? FormatBytes(*value) : "-");
    }
    if (measured != nullptr) row.push_back(FormatBytes(bytes(*measured)));
    if (predicted != nullptr) row.push_back(FormatBytes(bytes(*predicted)));
    if (measured != nullptr && predicted != nullptr) {
      row.push_back(FormatBytesDelta(bytes(*measured) - bytes(*predicted)));
    }
    table.AddRow(row);
  }
  if (measured != nullptr) {
    // Run-level figures: in the "max over run" column when there is an "at peak" one before it.
    const auto ratio_row = [&](const char* label, double ratio) {
      std::vector<std::string> row = {label};
      if (at_peak) row.push_back("-");
      row.push_back(FormatPercent(ratio));
      table.AddRow(row);
    };
    ratio_row("fragmentation", measured->fragmentation_ratio());
    ratio_row("free-block fragmentation", measured->free_block_fragmentation_ratio());
  }
  return table.Render() + (measured != nullptr ? PeakMomentNote(*measured) : "");
}

std::string OutcomeSummary(const Experiment& experiment) {
  const std::string state = StateName(experiment.state());
  if (experiment.state() == Experiment::OOM && experiment.has_oom()) {
    const auto& oom = experiment.oom();
    std::string where = absl::StrCat("OOM in ", PhaseName(oom.phase()), " (step ", oom.step(),
                                     ", micro-step ", oom.micro_step());
    // Sweep points are numbered from 1 wherever a person reads them (watch, show, this table).
    if (experiment.spec().has_sweep())
      absl::StrAppend(&where, ", sweep point ", oom.sweep_index() + 1);
    absl::StrAppend(&where, ")");
    return where;
  }
  if (!experiment.state_reason().empty() && experiment.state() != Experiment::SUCCEEDED) {
    return absl::StrCat(state, ": ", experiment.state_reason());
  }
  return state;
}

std::string RenderCompareTable(const std::vector<Experiment>& experiments) {
  using Align = TextTable::Align;
  std::string out;
  // Parallel runs are compared by the per-rank peak: each figure's largest value over the ranks.
  const bool any_parallel = std::any_of(experiments.begin(), experiments.end(),
                                        [](const Experiment& e) { return IsParallel(e); });
  std::vector<std::string> legend_headers = {"id", "name", "state", "settings"};
  if (any_parallel) legend_headers.insert(legend_headers.end(), {"world size", "sharding"});
  TextTable legend(legend_headers, {});
  for (const auto& e : experiments) {
    std::vector<std::string> row = {e.id(), e.spec().name().empty() ? "-" : e.spec().name(),
                                    OutcomeSummary(e), SpecSummary(e.spec())};
    if (any_parallel) {
      row.push_back(absl::StrCat(WorldSize(e)));
      row.push_back(IsParallel(e) ? ShardingName(e.spec().parallel()) : "-");
    }
    legend.AddRow(row);
  }
  out += legend.Render();
  if (any_parallel) {
    out +=
        "parallel runs: each figure is the largest over their ranks (max per rank); at peak: the "
        "rank that peaked highest.\n";
  }
  out += "\n";

  std::vector<std::string> headers = {"category"};
  for (const auto& e : experiments) headers.push_back(e.id());
  for (size_t i = 1; i < experiments.size(); ++i) {
    headers.push_back(absl::StrCat(experiments[i].id(), " vs ", experiments[0].id()));
  }
  std::vector<Align> aligns(headers.size(), Align::kRight);
  aligns[0] = Align::kLeft;
  TextTable table(headers, aligns);
  const auto has_report = [](const Experiment& e) { return e.has_report(); };
  const auto oom_memory = [](const Experiment& e) -> const vramlab::v1::MemorySample* {
    return !e.has_report() && e.has_oom() && e.oom().has_memory() ? &e.oom().memory() : nullptr;
  };
  // A byte row's cell for one experiment: the report's anatomy, or for a run that ended in OOM
  // before any report, the peaks it reached up to the failure (the categories are unknown then).
  const auto cell =
      [&](const Experiment& e, const std::string& label,
          const std::function<int64_t(const MemoryAnatomy&)>& bytes) -> std::optional<int64_t> {
    if (e.ranks_size() > 0) return MaxOverRanks(e, label, bytes);
    if (has_report(e)) return bytes(e.report().anatomy());
    if (const auto* at_oom = oom_memory(e)) {
      if (label == "peak allocated") return at_oom->peak_allocated_bytes();
      if (label == "peak reserved") return at_oom->peak_reserved_bytes();
    }
    return std::nullopt;
  };
  std::vector<const MemoryAnatomy*> shown;
  for (const auto& e : experiments) {
    if (e.has_report()) shown.push_back(&e.report().anatomy());
    if (e.has_prediction()) shown.push_back(&e.prediction().anatomy());
    for (const auto& rank : e.ranks()) {
      if (rank.has_report()) shown.push_back(&rank.report().anatomy());
    }
  }
  // The anatomy whose moments at the peak stand for the run: a parallel run's peak rank's.
  const auto peak_anatomy = [](const Experiment& e) -> const MemoryAnatomy* {
    if (e.ranks_size() > 0) {
      const vramlab::v1::RankResult* rank = PeakRank(e);
      return rank != nullptr ? &rank->report().anatomy() : nullptr;
    }
    return e.has_report() ? &e.report().anatomy() : nullptr;
  };
  for (const auto& [label, bytes, at_peak_bytes] : CompareRows(shown, any_parallel)) {
    std::vector<std::string> row = {label};
    std::vector<std::optional<int64_t>> values;
    for (const auto& e : experiments) {
      values.push_back(cell(e, label, bytes));
      row.push_back(values.back() ? FormatBytes(*values.back()) : "-");
    }
    for (size_t i = 1; i < experiments.size(); ++i) {
      row.push_back(values[0] && values[i] ? FormatBytesDelta(*values[i] - *values[0]) : "-");
    }
    table.AddRow(row);
  }
  // The moments allocated and reserved peaked, for the runs that have them: categories that sum
  // to peak allocated, and the cache where reserved peaked. The rows above are maxima over the run.
  bool any_at_peak = false;
  for (const auto& e : experiments) {
    any_at_peak =
        any_at_peak || (peak_anatomy(e) != nullptr && peak_anatomy(e)->has_at_peak_allocated());
  }
  if (any_at_peak) {
    for (const auto& [label, bytes, at_peak_bytes] : CompareRows(shown, any_parallel)) {
      std::vector<std::string> row = {absl::StrCat("at peak: ", label)};
      std::vector<std::optional<int64_t>> values;
      for (const auto& e : experiments) {
        const MemoryAnatomy* anatomy = peak_anatomy(e);
        values.push_back(anatomy != nullptr ? at_peak_bytes(*anatomy) : std::nullopt);
        row.push_back(values.back() ? FormatBytes(*values.back()) : "-");
      }
      if (std::none_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); }))
        continue;
      for (size_t i = 1; i < experiments.size(); ++i) {
        row.push_back(values[0] && values[i] ? FormatBytesDelta(*values[i] - *values[0]) : "-");
      }
      table.AddRow(row);
    }
  }
  // What the estimator predicted before the run, next to what was measured.
  const auto predicted_row = [&](const char* label, int64_t (*bytes)(const MemoryAnatomy&)) {
    std::vector<std::string> row = {label};
    for (const auto& e : experiments) {
      // A parallel run's prediction for one rank, what its max per rank is compared with.
      const MemoryAnatomy& predicted = e.prediction().has_parallel()
                                           ? e.prediction().parallel().anatomy()
                                           : e.prediction().anatomy();
      row.push_back(e.has_prediction() ? FormatBytes(bytes(predicted)) : "-");
    }
    row.resize(headers.size(), "");
    table.AddRow(row);
  };
  predicted_row("predicted peak allocated",
                [](const MemoryAnatomy& a) { return a.peak_allocated_bytes(); });
  predicted_row("predicted peak reserved",
                [](const MemoryAnatomy& a) { return a.peak_reserved_bytes(); });
  // The failure itself, for runs that ran out of memory.
  bool any_oom = false;
  for (const auto& e : experiments) any_oom = any_oom || e.has_oom();
  if (any_oom) {
    const struct {
      const char* label;
      int64_t (*bytes)(const vramlab::v1::OomReport&);
      bool needs_memory;  // read from the allocator's state at the failure
    } oom_rows[] = {
        {"OOM: allocated",
         [](const vramlab::v1::OomReport& o) { return o.memory().allocated_bytes(); }, true},
        {"OOM: reserved",
         [](const vramlab::v1::OomReport& o) { return o.memory().reserved_bytes(); }, true},
        {"OOM: request", [](const vramlab::v1::OomReport& o) { return o.requested_bytes(); },
         false},
        {"OOM: free", [](const vramlab::v1::OomReport& o) { return o.free_bytes(); }, false},
    };
    for (const auto& oom_row : oom_rows) {
      std::vector<std::string> row = {oom_row.label};
      for (const auto& e : experiments) {
        const bool known = e.has_oom() && (e.oom().has_memory() || oom_row.needs_memory == false);
        row.push_back(known ? FormatBytes(oom_row.bytes(e.oom())) : "-");
      }
      row.resize(headers.size(), "");
      table.AddRow(row);
    }
  }
  // Speed rows: what a switch costs in time. Ratios to the first experiment.
  const struct {
    const char* label;
    double (*value)(const Experiment&);
    std::string (*format)(double);
    bool ratio = true;
  } speed_rows[] = {
      {"step time (steady)",
       [](const Experiment& e) { return e.report().median_step_time_seconds(); },
       [](double v) { return FormatSeconds(v); }},
      {"tokens/s", [](const Experiment& e) { return e.report().tokens_per_second(); },
       [](double v) { return absl::StrFormat("%.0f", v); }},
      // What the two rows above rest on: the warm-up step is left out, so with one step there
      // is no speed to compare (the rows say "-").
      {"steady steps",
       [](const Experiment& e) { return static_cast<double>(e.report().steady_steps()); },
       [](double v) { return absl::StrFormat("%.0f", v); }, false},
  };
  for (const auto& speed : speed_rows) {
    std::vector<std::string> row = {speed.label};
    for (const auto& e : experiments) {
      const bool shown =
          has_report(e) && (speed.value(e) > 0 || (!speed.ratio && e.report().warmup_steps() > 0));
      row.push_back(shown ? speed.format(speed.value(e)) : "-");
    }
    for (size_t i = 1; i < experiments.size(); ++i) {
      row.push_back(speed.ratio ? Ratio(speed.value(experiments[i]), speed.value(experiments[0]))
                                : "");
    }
    table.AddRow(row);
  }
  out += table.Render();
  return out;
}

}  // namespace vramlab::client
