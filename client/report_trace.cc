// The report as a Chrome trace (the Trace Event Format's JSON object form), which Perfetto's UI
// and chrome://tracing open for zooming: one process per rank, the phases as complete ("X")
// slices, sweep points as slices of their own thread, memory as counters ("C"), the OOM as an
// instant ("i"). Built from the recorded events themselves, not the report's downsampled timeline.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/rank_views.h"
#include "client/report_formats.h"
#include "client/timeline.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;
using vramlab::v1::MemorySample;

// Threads of each rank's process.
constexpr int kPhaseThread = 1, kSweepThread = 2;

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (byte < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", byte);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Seconds since the (rank's first) worker started as the format's microseconds.
std::string Micros(double seconds) { return absl::StrFormat("%.3f", seconds * 1e6); }

std::string Metadata(const char* name, int pid, int tid, const std::string& value) {
  return absl::StrFormat(
      "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}", name, pid, tid,
      JsonQuote(value));
}

// The counters of one reading, its time shifted by `shift` seconds: allocated and reserved, and
// the live bytes by category where the reading has them (the adapter's categories only for an
// adapter run).
void Counters(const MemorySample& s, double shift, int pid, bool adapter,
              std::vector<std::string>* out) {
  out->push_back(absl::StrFormat(
      "{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":%s,\"pid\":%d,\"tid\":0,"
      "\"args\":{\"allocated\":%d,\"reserved\":%d}}",
      Micros(s.time_seconds() + shift), pid, s.allocated_bytes(), s.reserved_bytes()));
  if (!s.has_categories()) return;
  std::vector<std::string> args;
  for (const auto& c : AnatomyComponents()) {
    if (c.category == nullptr || (c.adapter_only && !adapter)) continue;
    args.push_back(absl::StrFormat("%s:%d", JsonQuote(c.label), c.category(s.categories())));
  }
  out->push_back(
      absl::StrFormat("{\"name\":\"memory by "
                      "category\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":%s,\"pid\":%d,\"tid\":0,"
                      "\"args\":{%s}}",
                      Micros(s.time_seconds() + shift), pid, absl::StrJoin(args, ",")));
}

struct Slice {
  std::string name;
  double start, end;
  int pid, tid;
  std::string args;  // a JSON object's members
};

std::string SliceEvent(const Slice& s) {
  return absl::StrFormat(
      "{\"name\":%s,\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,\"pid\":%d,\"tid\":%d,"
      "\"args\":{%s}}",
      JsonQuote(s.name), s.tid == kPhaseThread ? "phase" : "sweep", Micros(s.start),
      Micros(std::max(s.end - s.start, 0.0)), s.pid, s.tid, s.args);
}

}  // namespace

std::string RenderTraceReport(const Experiment& e, const std::vector<ExperimentEvent>& events) {
  std::vector<std::string> out;
  std::set<int> ranks;
  std::vector<Slice> slices;
  // Per rank: open phases keyed by (phase, step, micro-step, sweep index), the last time seen, and
  // each sweep point's span.
  std::map<std::tuple<int, int, int, int, int>, double> open;
  std::map<int, double> last_time;
  std::map<std::pair<int, int>, std::pair<double, double>> sweep_spans;
  const bool sweep = e.spec().has_sweep();
  const auto adapter_kind = e.spec().training().adapter().kind();
  const bool adapter = adapter_kind == vramlab::v1::LORA || adapter_kind == vramlab::v1::QLORA;
  std::map<int, int> sweep_values;  // sweep index -> the swept variable's value
  for (int i = 0; i < e.spec().sweep().values_size(); ++i)
    sweep_values[i] = e.spec().sweep().values(i);
  const std::vector<double> shifts = WorkerClockShifts(events);
  for (size_t i = 0; i < events.size(); ++i) {
    const ExperimentEvent& event = events[i];
    if (!event.has_worker_event()) continue;
    const double shift = shifts[i];
    const auto& worker = event.worker_event();
    const int pid = worker.rank() + 1;
    ranks.insert(worker.rank());
    const MemorySample* memory = nullptr;
    if (worker.has_sample()) {
      memory = &worker.sample();
    } else if (worker.has_phase()) {
      const auto& p = worker.phase();
      if (p.has_memory()) memory = &p.memory();
      const double t = p.memory().time_seconds() + shift;
      const auto key = std::make_tuple(pid, static_cast<int>(p.phase()), p.step(), p.micro_step(),
                                       p.sweep_index());
      if (p.edge() == vramlab::v1::BEGIN) {
        open[key] = t;
      } else if (p.edge() == vramlab::v1::END) {
        if (auto it = open.find(key); it != open.end()) {
          slices.push_back({PhaseName(p.phase()), it->second, t, pid, kPhaseThread,
                            absl::StrFormat("\"step\":%d,\"micro_step\":%d,\"sweep_index\":%d",
                                            p.step(), p.micro_step(), p.sweep_index())});
          open.erase(it);
        }
      }
      if (sweep) {
        auto [it, inserted] = sweep_spans.try_emplace({pid, p.sweep_index()}, t, t);
        it->second.first = std::min(it->second.first, t);
        it->second.second = std::max(it->second.second, t);
      }
    } else if (worker.has_sweep_point()) {
      sweep_values[worker.sweep_point().sweep_index()] = worker.sweep_point().value();
    } else if (worker.has_oom()) {
      const auto& oom = worker.oom();
      if (oom.has_memory()) memory = &oom.memory();
      out.push_back(absl::StrFormat(
          "{\"name\":%s,\"cat\":\"oom\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%s,\"pid\":%d,\"tid\":%d,"
          "\"args\":{"
          "\"requested_bytes\":%d,\"free_bytes\":%d,\"allocated_bytes\":%d,\"phase\":%s,\"step\":%"
          "d,"
          "\"micro_step\":%d,\"sweep_index\":%d,\"message\":%s}}",
          JsonQuote(
              absl::StrCat("OOM: request of ", FormatBytes(oom.requested_bytes()), " refused")),
          Micros(oom.memory().time_seconds() + shift), pid, kPhaseThread, oom.requested_bytes(),
          oom.free_bytes(), oom.memory().allocated_bytes(), JsonQuote(PhaseName(oom.phase())),
          oom.step(), oom.micro_step(), oom.sweep_index(), JsonQuote(oom.message())));
    }
    if (memory != nullptr) {
      Counters(*memory, shift, pid, adapter, &out);
      last_time[pid] = std::max(last_time[pid], memory->time_seconds() + shift);
    }
  }
  // A phase cut short (the OOM, a cancellation) ends at its rank's last reading, and says so.
  for (const auto& [key, start] : open) {
    const auto [pid, phase, step, micro_step, sweep_index] = key;
    slices.push_back(
        {PhaseName(static_cast<vramlab::v1::Phase>(phase)), start, last_time[pid], pid,
         kPhaseThread,
         absl::StrFormat("\"step\":%d,\"micro_step\":%d,\"sweep_index\":%d,\"cut_short\":true",
                         step, micro_step, sweep_index)});
  }
  for (const auto& [key, span] : sweep_spans) {
    const int index = key.second;
    const auto value = sweep_values.find(index);
    slices.push_back(
        {absl::StrCat("sweep point ", index + 1,
                      value != sweep_values.end() ? absl::StrCat(" (", value->second, ")") : ""),
         span.first, span.second, key.first, kSweepThread,
         absl::StrFormat("\"sweep_index\":%d,\"value\":%d", index,
                         value != sweep_values.end() ? value->second : 0)});
  }
  for (const Slice& s : slices) out.push_back(SliceEvent(s));

  std::vector<std::string> metadata;
  for (int rank : ranks) {
    const int pid = rank + 1;
    metadata.push_back(Metadata(
        "process_name", pid, 0,
        ranks.size() > 1 || IsParallel(e) ? absl::StrCat(e.id(), " rank ", rank) : e.id()));
    metadata.push_back(
        absl::StrFormat("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                        "\"args\":{\"sort_index\":%d}}",
                        pid, rank));
    metadata.push_back(Metadata("thread_name", pid, kPhaseThread, "phases"));
    if (sweep) metadata.push_back(Metadata("thread_name", pid, kSweepThread, "sweep points"));
  }
  out.insert(out.begin(), metadata.begin(), metadata.end());
  return absl::StrCat(
      "{\"traceEvents\":[\n", absl::StrJoin(out, ",\n"),
      "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"experiment\":", JsonQuote(e.id()),
      ",\"name\":", JsonQuote(e.spec().name()), ",\"settings\":", JsonQuote(SpecSummary(e.spec())),
      ",\"outcome\":", JsonQuote(OutcomeSummary(e)), "}}\n");
}

}  // namespace vramlab::client
