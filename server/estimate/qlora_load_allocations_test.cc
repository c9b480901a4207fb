// QLoRA's predicted sequence (qlora_load_allocations.h for LOAD, adapter_allocations.h for the
// steps) against the allocator history of a recorded QLoRA run.
#include "server/estimate/qlora_load_allocations.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/device_model.h"
#include "server/estimate/parameter_state.h"
#include "server/estimate/replay_verdict.h"
#include "server/estimate/run_settings.h"
#include "server/estimate/run_settings_test_util.h"
#include "server/estimate/step_allocations.h"

namespace vramlab::server::estimate {
namespace {

// Qwen2.5-7B QLoRA (rank 16), sdpa, checkpointed, default allocator, 1 x 2,048 tokens, 2 steps,
// recorded on an H100 with the allocator's history. The history kept its last 100,000 entries:
// the trace starts inside LOAD's quantisation and runs past the second step into teardown.
const std::string kRun =
    std::string(VRAMLAB_SOURCE_DIR) + "/docs/results/h100-2026-12-07-traces/qloranative";
// The caching allocator's small-pool limit: the blocks above it are the ones whose places decide
// the large segments.
constexpr int64_t kSmallPoolBytes = int64_t{1} << 20;

// An allocation (+bytes) or free (-bytes) of a large block, sizes rounded as the allocator does.
using Ops = std::vector<int64_t>;

struct Op {
  bool alloc;
  int64_t id, bytes;
};

// The large blocks' operations of `ops` from index `from`: frees of tensors made before it are
// not known, as in a history that starts late.
Ops LargeOps(const std::vector<Op>& ops, size_t from) {
  std::map<int64_t, int64_t> live;
  Ops out;
  for (size_t i = from; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int64_t bytes = op.alloc ? AllocatedBytes(Device::kCuda, op.bytes) : live[op.id];
    if (op.alloc) {
      live[op.id] = bytes;
    } else {
      live.erase(op.id);
    }
    if (bytes > kSmallPoolBytes) out.push_back(op.alloc ? bytes : -bytes);
  }
  return out;
}

std::vector<Op> RecordedOps(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<Op> ops;
  std::string line, word;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    Op op{};
    if (!(words >> word)) continue;
    if (word == "alloc" && words >> op.id >> op.bytes) {
      op.alloc = true;
      ops.push_back(op);
    } else if (word == "free" && words >> op.id) {
      ops.push_back(op);
    }
  }
  return ops;
}

TEST(QloraSequenceTest, LargeBlocksFollowTheRecordedRunFromQuantisationToTheSecondStep) {
  std::ifstream spec_file(kRun + ".spec.json");
  std::stringstream json;
  json << spec_file.rdbuf();
  const RunSettings run = RunSettingsFromJson(json.str());
  const std::vector<AllocationEvent> events =
      PlanStepAllocations(run, EstimateParameterState(run), kReplaySteps, kReplayMicroSteps);
  std::vector<Op> predicted;
  for (const AllocationEvent& e : events) {
    predicted.push_back({e.kind == AllocationEvent::kAlloc, e.id, e.bytes});
  }
  const std::vector<Op> recorded = RecordedOps(kRun + ".trace");
  const Ops recorded_large = LargeOps(recorded, 0);
  // The recorded large allocations are the last ones predicted (teardown only frees): align the
  // predicted sequence at the first of them.
  std::vector<size_t> large_allocs;
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (predicted[i].alloc && AllocatedBytes(Device::kCuda, predicted[i].bytes) > kSmallPoolBytes)
      large_allocs.push_back(i);
  }
  size_t recorded_allocs = 0;
  for (int64_t op : recorded_large) recorded_allocs += op > 0;
  ASSERT_GT(recorded_allocs, 20000u);
  ASSERT_GE(large_allocs.size(), recorded_allocs);
  const Ops predicted_large =
      LargeOps(predicted, large_allocs[large_allocs.size() - recorded_allocs]);
  ASSERT_LE(predicted_large.size(), recorded_large.size());
  for (size_t i = 0; i < predicted_large.size(); ++i) {
    ASSERT_EQ(predicted_large[i], recorded_large[i])
        << "large-block operation " << i << " of " << predicted_large.size();
  }
  // Past the predicted end: the recorded run's teardown, frees only.
  for (size_t i = predicted_large.size(); i < recorded_large.size(); ++i) {
    EXPECT_LT(recorded_large[i], 0) << "large-block operation " << i;
  }
}

// What LOAD leaves is what the parameter state counts as the weights: the codes, the absmax codes
// and scales and the tables, the adapters and the parameters that are not quantised.
TEST(QloraLoadTest, LeavesTheParameterStatesWeights) {
  for (const char* preset : {"qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b"}) {
    const RunSettings run =
        RunSettingsFromJson(std::string(R"({"device": "CUDA", "model": {"preset": ")") + preset +
                            R"("}, "training": {"dtype": "BFLOAT16", "adapter":
                                  {"kind": "QLORA", "rank": 8}}})");
    AllocationLog log(Device::kCuda);
    log.At(vramlab::v1::LOAD);
    PlanQloraLoad(run, &log);
    std::map<int64_t, int64_t> live;
    for (const AllocationEvent& e : log.TakeEvents()) {
      if (e.kind == AllocationEvent::kAlloc) {
        live[e.id] = e.bytes;
      } else {
        live.erase(e.id);
      }
    }
    int64_t bytes = 0;
    for (const auto& [id, b] : live) bytes += AllocatedBytes(Device::kCuda, b);
    EXPECT_EQ(bytes, EstimateParameterState(run).weights) << preset;
  }
}

}  // namespace
}  // namespace vramlab::server::estimate
