// vramlab-estimate-bench: how long the estimator (server/estimate, as the daemon's EstimateMemory
// runs it) takes to answer a 7B, 32-layer sweep of 8 points, with the allocator replay that
// decides each verdict (docs/ESTIMATOR.md, "Reserved by replay"). Target: under 1 s
// (docs/BENCHMARKS.md, "Estimator").
//
//   vramlab-estimate-bench [--repeats N]
//
// Prints one line per case: the median and the slowest wall time of N estimates (default 5) and
// their median CPU time, in ms.
// Exit status 1 when a case's slowest estimate takes 1 s or more.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"
#include "server/estimate/estimator.h"

namespace {

// mistral-7b-v0.3: 32 decoder layers, 7.25 B parameters. Three steps, as the replay replays.
std::string SweepSpec(const char* attention, int checkpoint_every, bool expandable) {
  return absl::StrFormat(
      R"({"name": "bench: 7B sweep", "device": "CUDA", "model": {"preset": "mistral-7b-v0.3"},
          "training": {"microBatchSize": 1, "seqLen": 512, "steps": 3, "dtype": "BFLOAT16",
                       "attention": "%s", "checkpointEveryKLayers": %d,
                       "optimizer": {"kind": "ADAMW_8BIT"}},
          "memory": {"deviceMemoryLimitBytes": "85899345920",
                     "allocator": {"expandableSegments": %s}},
          "sweep": {"variable": "SEQ_LEN", "mode": "LIST",
                    "values": [512, 1024, 2048, 3072, 4096, 6144, 8192, 16384]}})",
      attention, checkpoint_every, expandable ? "true" : "false");
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  if (argc == 3 && std::string(argv[1]) == "--repeats") repeats = std::max(1, std::atoi(argv[2]));
  struct Case {
    const char* name;
    std::string json;
  };
  const std::vector<Case> cases = {
      {"eager, default allocator", SweepSpec("EAGER", 0, false)},
      {"sdpa, checkpointing, expandable segments", SweepSpec("SDPA", 1, true)},
      {"sdpa, checkpointing, default allocator", SweepSpec("SDPA", 1, false)},
  };
  bool slow = false;
  for (const Case& c : cases) {
    vramlab::v1::ExperimentSpec spec;
    if (!google::protobuf::util::JsonStringToMessage(c.json, &spec).ok()) {
      std::fprintf(stderr, "bad spec: %s\n", c.name);
      return 2;
    }
    std::vector<double> ms, cpu_ms;
    int points = 0;
    for (int i = 0; i < repeats; ++i) {
      const std::clock_t cpu_start = std::clock();
      const auto start = std::chrono::steady_clock::now();
      const auto estimate = vramlab::server::EstimateMemory(spec, 0);
      const auto end = std::chrono::steady_clock::now();
      if (!estimate.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name, std::string(estimate.status().message()).c_str());
        return 2;
      }
      points = estimate->points_size();
      ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
      cpu_ms.push_back(1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu_ms.begin(), cpu_ms.end());
    std::printf(
        "7B (32 layers), %d-point sweep, %s: wall median %.1f ms, slowest %.1f ms; CPU median "
        "%.1f ms (%d runs)\n",
        points, c.name, ms[ms.size() / 2], ms.back(), cpu_ms[cpu_ms.size() / 2], repeats);
    slow = slow || ms.back() >= 1000.0;
  }
  return slow ? 1 : 0;
}
