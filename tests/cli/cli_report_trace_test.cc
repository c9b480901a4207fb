// vramlab report --format perfetto for a normal, an OOM, a sweep and a two-rank run of the real
// worker, and for a two-rank sweep (a gang of workers per point): the trace passes a strict reader
// of the Trace Event Format (tests/cli/check_trace.py: phases, types, microsecond timestamps,
// slices that nest), and its counters, phase slices, sweep points and OOM instant are exactly the
// run's stored events.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "tests/cli/report_runs.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using vramlab::v1::ExperimentEvent;

// What a rank's stored events say the trace must hold.
struct Expected {
  int readings = 0;
  int64_t max_allocated = 0;
  std::vector<std::pair<double, std::string>> phase_begins;  // time (µs), phase name
  std::vector<double> phase_ends;
  std::vector<const vramlab::v1::OomReport*> ooms;
  std::map<int, bool> sweep_points;
};

std::map<int, Expected> FromEvents(const std::vector<ExperimentEvent>& events) {
  std::map<int, Expected> ranks;
  for (const auto& event : events) {
    if (!event.has_worker_event()) continue;
    const auto& w = event.worker_event();
    Expected& e = ranks[w.rank()];
    const vramlab::v1::MemorySample* memory = nullptr;
    if (w.has_sample()) memory = &w.sample();
    if (w.has_phase()) {
      if (w.phase().has_memory()) memory = &w.phase().memory();
      const double us = w.phase().memory().time_seconds() * 1e6;
      if (w.phase().edge() == vramlab::v1::BEGIN)
        e.phase_begins.emplace_back(us, vramlab::v1::Phase_Name(w.phase().phase()));
      if (w.phase().edge() == vramlab::v1::END) e.phase_ends.push_back(us);
      e.sweep_points[w.phase().sweep_index()] = true;
    }
    if (w.has_oom()) {
      e.ooms.push_back(&w.oom());
      if (w.oom().has_memory()) memory = &w.oom().memory();
    }
    if (memory != nullptr) {
      ++e.readings;
      e.max_allocated = std::max(e.max_allocated, memory->allocated_bytes());
    }
  }
  return ranks;
}

class CliReportTraceTest : public ReportRunsTest<CliReportTraceTest> {
 protected:
  // The checker's summary of `kind`'s trace, one Struct per process; fails the test when the
  // checker rejects it.
  static std::vector<Struct> CheckedTrace(const std::string& kind, std::string* path) {
    *path = TempPath(kind + ".trace.json");
    const CliResult r = Report(kind, "perfetto", *path);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    const CliResult checked = RunShell(
        "python3 " + ShellQuote(std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/check_trace.py") +
        " " + ShellQuote(*path));
    EXPECT_EQ(checked.exit_code, 0) << Describe(checked);
    std::vector<Struct> processes;
    for (const std::string& line : checked.OutLines()) {
      Struct process;
      EXPECT_TRUE(ParseJson(line, process));
      processes.push_back(process);
    }
    return processes;
  }
};

double Number(const Struct& s, const std::string& key) { return s.fields().at(key).number_value(); }

TEST_F(CliReportTraceTest, CountersSlicesAndTheOomAreTheStoredEvents) {
  auto stub = daemon_->NewStub();
  for (const auto& [kind, id] : ids_) {
    SCOPED_TRACE(kind);
    std::string path;
    const std::vector<Struct> processes = CheckedTrace(kind, &path);
    auto events = vramlab::testing::WatchAll(*stub, id);
    ASSERT_TRUE(events.ok()) << events.status();
    const std::map<int, Expected> expected = FromEvents(*events);
    ASSERT_EQ(processes.size(), expected.size()) << path;
    ASSERT_EQ(expected.size(), kind == "parallel" ? 2u : 1u);
    for (const auto& [rank, want] : expected) {
      SCOPED_TRACE(absl::StrCat("rank ", rank));
      const Struct& process = processes.at(rank);
      EXPECT_EQ(Number(process, "pid"), rank + 1);
      EXPECT_EQ(process.fields().at("process").string_value(),
                kind == "parallel" ? absl::StrCat(id, " rank ", rank) : id);
      // A counter per reading, allocated's maximum the readings' maximum.
      const Struct& memory =
          process.fields().at("counters").struct_value().fields().at("memory").struct_value();
      EXPECT_EQ(Number(memory, "count"), want.readings);
      EXPECT_EQ(Number(memory.fields().at("max").struct_value(), "allocated"), want.max_allocated);
      const Struct& categories = process.fields()
                                     .at("counters")
                                     .struct_value()
                                     .fields()
                                     .at("memory by category")
                                     .struct_value();
      EXPECT_EQ(Number(categories, "count"), want.readings);
      EXPECT_GT(Number(categories.fields().at("max").struct_value(), "weights"), 0);

      // A slice per phase that began, starting when it began; as many that ended as END events.
      std::vector<const google::protobuf::ListValue*> phases, sweep_points;
      for (const Value& slice : process.fields().at("slices").list_value().values()) {
        const auto& fields = slice.list_value();
        (fields.values(4).number_value() == 1 ? phases : sweep_points).push_back(&fields);
      }
      ASSERT_EQ(phases.size(), want.phase_begins.size());
      int cut_short = 0;
      std::multiset<double> ends(want.phase_ends.begin(), want.phase_ends.end());
      for (const auto* slice : phases) {
        const double ts = slice->values(1).number_value();
        const double end = ts + slice->values(2).number_value();
        const auto begin =
            std::find_if(want.phase_begins.begin(), want.phase_begins.end(),
                         [&](const auto& b) { return std::abs(b.first - ts) < 0.01; });
        EXPECT_NE(begin, want.phase_begins.end()) << "no BEGIN at " << ts;
        const auto& args = slice->values(3).struct_value().fields();
        if (args.count("cut_short")) {
          ++cut_short;
          continue;
        }
        const auto match = std::find_if(ends.begin(), ends.end(),
                                        [&](double e) { return std::abs(e - end) < 0.01; });
        ASSERT_NE(match, ends.end()) << "no END at " << end;
        ends.erase(match);
      }
      EXPECT_TRUE(ends.empty());
      EXPECT_EQ(cut_short, static_cast<int>(want.phase_begins.size() - want.phase_ends.size()));
      EXPECT_EQ(sweep_points.size(), kind == "sweep" ? want.sweep_points.size() : 0u);

      // The OOM as one instant at its time, with its request.
      const auto& instants = process.fields().at("instants").list_value().values();
      ASSERT_EQ(instants.size(), want.ooms.size());
      for (int i = 0; i < instants.size(); ++i) {
        const auto& instant = instants[i].list_value();
        const auto* oom = want.ooms[i];
        EXPECT_NEAR(instant.values(1).number_value(), oom->memory().time_seconds() * 1e6, 0.01);
        EXPECT_EQ(instant.values(2).string_value(), "p");
        EXPECT_EQ(Number(instant.values(3).struct_value(), "requested_bytes"),
                  oom->requested_bytes());
      }
    }
    if (kind == "oom") {
      EXPECT_EQ(expected.at(0).ooms.size(), 1u);
      EXPECT_EQ(expected.at(0).phase_begins.size() - expected.at(0).phase_ends.size(), 1u)
          << "the OOM cuts its phase short";
    }
    if (kind == "normal") EXPECT_GT(expected.at(0).readings, 100);
  }
}

// A parallel sweep runs one gang of workers per point, so each rank has a worker per point: the
// trace keeps the points apart on each rank's timeline, the slices still nest, and each point's
// phase slices lie within its sweep-point slice, in the order the points ran.
TEST_F(CliReportTraceTest, ASweepOfOneWorkerPerPointKeepsItsPointsApart) {
  const CliResult submitted =
      RunCli({"submit", "--addr", daemon_->address(), "--wait", "--preset", "tiny", "--dtype",
              "fp32", "--steps", "2", "--world-size", "2", "--sharding", "optimizer",
              "--sweep-seq-lens", "32,64", "--name", "parallel-sweep"});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  const std::string id = submitted.OutLines().at(0);
  const std::string path = TempPath("parallel-sweep.trace.json");
  const CliResult r =
      RunCli({"report", id, "--addr", daemon_->address(), "--format", "perfetto", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // Each point's workers label every phase with that point, their SETUP included: per rank, a
  // SETUP for each point.
  auto stub = daemon_->NewStub();
  auto events = vramlab::testing::WatchAll(*stub, id);
  ASSERT_TRUE(events.ok()) << events.status();
  std::map<int, std::vector<int>> setups;  // rank -> sweep index of each SETUP begun
  for (const auto& event : *events) {
    if (!event.has_worker_event() || !event.worker_event().has_phase()) continue;
    const auto& phase = event.worker_event().phase();
    if (phase.phase() == vramlab::v1::SETUP && phase.edge() == vramlab::v1::BEGIN) {
      setups[event.worker_event().rank()].push_back(phase.sweep_index());
    }
  }
  ASSERT_EQ(setups.size(), 2u);
  for (const auto& [rank, indices] : setups) {
    EXPECT_EQ(indices, (std::vector<int>{0, 1})) << "rank " << rank;
  }
  const CliResult checked = RunShell(
      "python3 " + ShellQuote(std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/check_trace.py") + " " +
      ShellQuote(path));
  ASSERT_EQ(checked.exit_code, 0) << Describe(checked);
  const std::vector<std::string> lines = checked.OutLines();
  ASSERT_EQ(lines.size(), 2u) << checked.out;
  for (const std::string& line : lines) {
    Struct process;
    ASSERT_TRUE(ParseJson(line, process));
    // [start, end] of each sweep point, and of each phase slice by its point.
    std::map<int, std::pair<double, double>> points;
    std::vector<std::pair<int, std::pair<double, double>>> phases;
    for (const Value& slice : process.fields().at("slices").list_value().values()) {
      const auto& fields = slice.list_value();
      const double ts = fields.values(1).number_value();
      const double end = ts + fields.values(2).number_value();
      const int index = static_cast<int>(
          fields.values(3).struct_value().fields().at("sweep_index").number_value());
      if (fields.values(4).number_value() == 1) {
        phases.push_back({index, {ts, end}});
      } else {
        points[index] = {ts, end};
      }
    }
    ASSERT_EQ(points.size(), 2u) << line;
    EXPECT_LE(points.at(0).second, points.at(1).first) << line;
    for (const auto& [index, span] : phases) {
      EXPECT_GE(span.first, points.at(index).first - 0.01) << line;
      EXPECT_LE(span.second, points.at(index).second + 0.01) << line;
    }
  }
}

TEST_F(CliReportTraceTest, TheCheckerRejectsWhatTraceViewersCannotRead) {
  // The strict reader is what vouches for the format: it must refuse the common mistakes.
  const std::vector<std::pair<std::string, std::string>> broken = {
      {"not-an-object", "[]"},
      {"unknown-phase", R"({"traceEvents":[{"name":"a","ph":"Q","pid":1,"tid":1,"ts":0}]})"},
      {"string-counter",
       R"({"traceEvents":[{"name":"m","ph":"C","pid":1,"tid":0,"ts":0,"args":{"a":"1"}}]})"},
      {"negative-dur",
       R"({"traceEvents":[{"name":"p","ph":"X","pid":1,"tid":1,"ts":5,"dur":-1}]})"},
      {"no-process-name",
       R"({"traceEvents":[{"name":"p","ph":"X","pid":1,"tid":1,"ts":5,"dur":1}]})"},
      {"crossing-slices",
       R"({"traceEvents":[{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"x"}},
          {"name":"a","ph":"X","pid":1,"tid":1,"ts":0,"dur":10},{"name":"b","ph":"X","pid":1,"tid":1,"ts":5,"dur":10}]})"},
  };
  for (const auto& [name, json] : broken) {
    const std::string path = TempPath(name + ".json");
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fwrite(json.data(), 1, json.size(), f);
    fclose(f);
    const CliResult r = RunShell(
        "python3 " + ShellQuote(std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/check_trace.py") +
        " " + ShellQuote(path));
    EXPECT_EQ(r.exit_code, 1) << name << "\n" << Describe(r);
    EXPECT_THAT(r.err, ::testing::StartsWith("trace: ")) << name;
  }
}

}  // namespace
}  // namespace vramlab::cli_test
