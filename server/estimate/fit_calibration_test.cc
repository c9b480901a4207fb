// The fit verdict against every recorded GPU run: testdata/estimator/fit_calibration.jsonl holds
// one row per run or sweep point (its spec, its limit, whether it fit or ran out of memory;
// format: testdata/estimator/README.md). No row may be FITS and have run out of memory, none
// DOES_NOT_FIT and have fit. A row with worker_run > 0 (a one-process sweep's later point) is
// estimated as such (EstimateOptions::after_other_points). The FITS / TIGHT / DOES_NOT_FIT counts
// against the outcome are printed (docs/ESTIMATOR.md, "Does it fit", quotes them).
//
// testdata/estimator/fit_heldout.jsonl holds near-limit runs that no constant of the estimator was
// set from (docs/ESTIMATOR.md, "Held out"): the same two rules, and on the rows that fit and that
// the replay decides without running out, the replayed peak reserved within 3 % of the measured.
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/estimate/estimator.h"

namespace vramlab::server {
namespace {

using vramlab::v1::FitVerdict;

struct Row {
  std::string name;
  vramlab::v1::ExperimentSpec spec;
  int64_t limit = 0;
  bool oom = false;
  int64_t peak_reserved = 0;  // measured; 0: not recorded
  int worker_run = 0;         // its place among its worker's runs (0: a fresh process)
  std::string source;         // where it was recorded
};

// One JSON object per line; a field missing or of the wrong kind fails the test naming the line.
bool ParseRow(const std::string& line, Row* row, std::string* error) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(line, &object).ok()) {
    *error = "not a JSON object";
    return false;
  }
  const auto& f = object.fields();
  for (const char* key : {"name", "spec", "outcome", "limit_bytes"}) {
    if (f.find(key) == f.end()) {
      *error = std::string("missing field ") + key;
      return false;
    }
  }
  row->name = f.at("name").string_value();
  if (const auto it = f.find("source"); it != f.end()) row->source = it->second.string_value();
  const std::string outcome = f.at("outcome").string_value();
  if (outcome != "FIT" && outcome != "OOM") {
    *error = "outcome: must be FIT or OOM, got \"" + outcome + "\"";
    return false;
  }
  row->oom = outcome == "OOM";
  if (const auto it = f.find("peak_reserved_bytes"); it != f.end()) {
    row->peak_reserved = static_cast<int64_t>(it->second.number_value());
  }
  if (const auto it = f.find("worker_run"); it != f.end()) {
    const double run = it->second.number_value();
    if (it->second.kind_case() != google::protobuf::Value::kNumberValue || run < 0 ||
        run != std::floor(run)) {
      *error = "worker_run: must be a whole number >= 0";
      return false;
    }
    row->worker_run = static_cast<int>(run);
  }
  row->limit = static_cast<int64_t>(f.at("limit_bytes").number_value());
  if (row->limit <= 0) {
    *error = "limit_bytes: must be positive";
    return false;
  }
  std::string spec_json;
  if (!google::protobuf::util::MessageToJsonString(f.at("spec").struct_value(), &spec_json).ok() ||
      !google::protobuf::util::JsonStringToMessage(spec_json, &row->spec).ok()) {
    *error = "spec: not an ExperimentSpec";
    return false;
  }
  return true;
}

// Checks every row of one table, printing each replayed row and the counts. `held_out` adds the
// reserved check.
void CheckTable(const std::string& file, bool held_out) {
  const std::string path = std::string(VRAMLAB_SOURCE_DIR) + "/testdata/estimator/" + file;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::map<std::pair<FitVerdict, bool>, int> counts;
  // The same counts by where the rows were recorded (the held-out sets, each run in one go).
  std::map<std::string, std::map<std::pair<FitVerdict, bool>, int>> by_source;
  std::string line;
  int number = 0, rows = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    Row row;
    std::string error;
    ASSERT_TRUE(ParseRow(line, &row, &error)) << path << ":" << number << ": " << error;
    // A later run of a worker (a one-process sweep's point after the first) is estimated as one.
    EstimateOptions options;
    options.after_other_points = row.worker_run > 0;
    const auto estimate = EstimateMemory(row.spec, row.limit, options);
    ASSERT_TRUE(estimate.ok()) << row.name << ": " << estimate.status();
    const FitVerdict verdict = estimate->verdict();
    ++counts[{verdict, row.oom}];
    ++by_source[row.source.substr(0, row.source.rfind('/'))][{verdict, row.oom}];
    ++rows;
    if (estimate->has_replay()) {
      const auto& r = estimate->replay();
      std::printf(
          "replay %-40s run %d %s %-12s measured %6.2f GiB replayed %6.2f GiB (%+.2f %% of "
          "limit)%s %s\n",
          row.name.c_str(), row.worker_run, row.oom ? "OOM" : "FIT",
          vramlab::v1::FitVerdict_Name(verdict).c_str(), row.peak_reserved / 1073741824.0,
          r.peak_reserved_bytes() / 1073741824.0,
          100.0 * (r.peak_reserved_bytes() - row.peak_reserved) / row.limit,
          r.oom() ? " replay-OOM" : "", r.reason().c_str());
      if (held_out && !row.oom && !r.oom()) {
        ASSERT_GT(row.peak_reserved, 0) << row.name << ": no measured peak reserved";
        EXPECT_LE(std::abs(r.peak_reserved_bytes() - row.peak_reserved), 0.03 * row.peak_reserved)
            << row.name << ": replayed peak reserved " << r.peak_reserved_bytes()
            << " against measured " << row.peak_reserved;
      }
    }
    EXPECT_FALSE(verdict == vramlab::v1::FITS && row.oom)
        << row.name << ": predicted FITS, ran out of memory";
    EXPECT_FALSE(verdict == vramlab::v1::DOES_NOT_FIT && !row.oom)
        << row.name << ": predicted DOES_NOT_FIT, fit";
    EXPECT_NE(verdict, vramlab::v1::FIT_VERDICT_UNSPECIFIED) << row.name;
  }
  ASSERT_GT(rows, 0) << path;
  auto print = [](std::map<std::pair<FitVerdict, bool>, int>& c) {
    std::cout << "verdict        fit  oom\n";
    for (FitVerdict v : {vramlab::v1::FITS, vramlab::v1::TIGHT, vramlab::v1::DOES_NOT_FIT}) {
      std::printf("%-13s %4d %4d\n", vramlab::v1::FitVerdict_Name(v).c_str(), c[{v, false}],
                  c[{v, true}]);
    }
  };
  if (held_out) {
    for (auto& [source, c] : by_source) {
      std::printf("recorded in %s:\n", source.c_str());
      print(c);
    }
  }
  std::printf("all rows:\n");
  print(counts);
  std::printf("rows %d\n", rows);
}

TEST(FitCalibrationTest, NoRecordedRunContradictsItsVerdict) {
  CheckTable("fit_calibration.jsonl", /*held_out=*/false);
}

TEST(FitCalibrationTest, NoHeldOutRunContradictsItsVerdictAndFittedRunsReplayWithin3Percent) {
  CheckTable("fit_heldout.jsonl", /*held_out=*/true);
}

}  // namespace
}  // namespace vramlab::server
