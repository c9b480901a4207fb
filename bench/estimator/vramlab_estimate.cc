// vramlab-estimate: the memory estimator (server/estimate) on the command line, without a daemon.
//
//   vramlab-estimate --spec spec.json [--limit-bytes N] [--allocations]
//
// Reads an ExperimentSpec in protobuf's canonical JSON (unknown fields rejected, as the daemon
// does; "-" reads stdin) and prints the MemoryEstimate as one line of canonical JSON with every
// field present. With --allocations it prints instead the allocations and frees the replay
// replays (step_allocations.h), in the trace format of testdata/estimator/traces/ with each
// line's phase, step and micro-step as a comment, to be set beside a recorded trace
// (bench/estimator/compare_traces.py). Exit status: 0 printed, 2 bad usage or invalid spec.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "google/protobuf/util/json_util.h"
#include "server/estimate/estimator.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/replay_verdict.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/step_allocations.h"

namespace {

constexpr int kExitUsage = 2;

int Usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "vramlab-estimate: " << problem << "\n";
  std::cerr << "usage: vramlab-estimate --spec FILE|- [--limit-bytes N] [--allocations]\n";
  return kExitUsage;
}

bool ReadAll(const std::string& path, std::string* out) {
  if (path == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

// The replay's sequence for `spec`, one operation per line.
int PrintAllocations(const vramlab::v1::ExperimentSpec& spec) {
  namespace est = vramlab::server::estimate;
  const absl::StatusOr<est::RunSettings> run = est::ResolveRunSettings(spec);
  if (!run.ok()) {
    std::cerr << "vramlab-estimate: " << run.status() << "\n";
    return kExitUsage;
  }
  const est::ParameterState params = est::EstimateParameterState(*run);
  for (const est::AllocationEvent& event :
       est::PlanStepAllocations(*run, params, est::kReplaySteps, est::kReplayMicroSteps)) {
    if (event.kind == est::AllocationEvent::kAlloc) {
      std::cout << "alloc " << event.id << " " << event.bytes;
    } else {
      std::cout << "free " << event.id;
    }
    std::cout << "  # " << vramlab::v1::Phase_Name(event.phase) << " " << event.step << " "
              << event.micro_step << "\n";
  }
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_path;
  int64_t limit_bytes = 0;
  bool allocations = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return Usage("");
    if (arg == "--allocations") {
      allocations = true;
      continue;
    }
    if (i + 1 >= argc) return Usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--spec") {
      spec_path = value;
    } else if (arg == "--limit-bytes") {
      if (!absl::SimpleAtoi(value, &limit_bytes) || limit_bytes < 0) {
        return Usage("--limit-bytes: not a non-negative integer: " + value);
      }
    } else {
      return Usage("unknown flag " + arg);
    }
  }
  if (spec_path.empty()) return Usage("--spec is required");

  std::string json;
  if (!ReadAll(spec_path, &json)) return Usage("cannot read " + spec_path);
  vramlab::v1::ExperimentSpec spec;
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;
  if (auto status = google::protobuf::util::JsonStringToMessage(json, &spec, parse_options);
      !status.ok()) {
    std::cerr << "vramlab-estimate: " << spec_path
              << ": not an ExperimentSpec: " << status.ToString() << "\n";
    return kExitUsage;
  }
  if (allocations) return PrintAllocations(spec);
  absl::StatusOr<vramlab::v1::MemoryEstimate> estimate =
      vramlab::server::EstimateMemory(spec, limit_bytes);
  if (!estimate.ok()) {
    std::cerr << "vramlab-estimate: " << estimate.status() << "\n";
    return kExitUsage;
  }
  google::protobuf::util::JsonPrintOptions print_options;
  print_options.always_print_primitive_fields = true;
  std::string out;
  if (auto status = google::protobuf::util::MessageToJsonString(*estimate, &out, print_options);
      !status.ok()) {
    std::cerr << "vramlab-estimate: " << status.ToString() << "\n";
    return EXIT_FAILURE;
  }
  std::cout << out << "\n";
  return EXIT_SUCCESS;
}
