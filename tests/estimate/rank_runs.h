// Test support for comparing one rank's estimate with the real worker's ranks: runs this tree's
// vramlab-worker as the ranks of a parallel run (--rank R, Gloo on the CPU, a free loopback port)
// or as one process and returns each one's `report` anatomy, runs vramlab-estimate on the same
// spec, and builds the specs (the tiny model on the CPU, AdamW, two steps) that the
// *_vs_worker_test.cc files beside it share. Header-only: tests/ compiles only *_test.cc and
// support/*.cc.
#ifndef VRAMLAB_TESTS_ESTIMATE_RANK_RUNS_H_
#define VRAMLAB_TESTS_ESTIMATE_RANK_RUNS_H_

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/loopback_port.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::rank_runs {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryAnatomy;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::WorkerEvent;

inline constexpr int kRanks = 2;

inline std::string BinDir() {
  const char* dir = std::getenv("VRAMLAB_BIN_DIR");
  return dir != nullptr ? dir : VRAMLAB_BIN_DIR;
}

inline std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(message, &json).ok());
  return json;
}

inline std::string TempPath(const std::string& stem) {
  std::string path = absl::StrCat("/tmp/vramlab-", stem, "-XXXXXX");
  const int fd = mkstemp(path.data());
  EXPECT_GE(fd, 0);
  close(fd);
  return path;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts `binary args...` with stdout to `out_path` (stderr to out_path.log).
inline std::unique_ptr<vramlab::testing::ChildProcess> Start(const std::string& binary,
                                                             const std::vector<std::string>& args,
                                                             const std::string& out_path) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<vramlab::testing::ChildProcess>(vramlab::testing::ChildOptions{
      .argv = argv, .stdout_file = out_path, .stderr_file = out_path + ".log"});
}

// The exit code of `child` once it ends; -1 when it did not exit on its own (killed, crashed).
inline int Wait(vramlab::testing::ChildProcess& child) { return child.Wait().exit_code; }

// The `report` event's anatomy among a worker's JSON lines.
inline MemoryAnatomy ReportAnatomy(const std::string& events, const std::string& what) {
  for (absl::string_view line : absl::StrSplit(events, '\n', absl::SkipEmpty())) {
    WorkerEvent event;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &event).ok()) continue;
    if (event.has_report()) return event.report().anatomy();
  }
  ADD_FAILURE() << what << ": no report event:\n" << events.substr(0, 2000);
  return MemoryAnatomy();
}

// Each rank's anatomy from a run of `spec` over `ranks` worker processes; `ranks` 0: one process
// (a spec without parallel ranks).
inline std::vector<MemoryAnatomy> RunRanks(const ExperimentSpec& spec, int ranks = kRanks) {
  const std::string spec_path = TempPath("parallel-spec");
  WriteFile(spec_path, ToJson(spec));
  const std::string rendezvous = absl::StrCat("127.0.0.1:", vramlab::testing::FreeLoopbackPort());
  std::vector<std::unique_ptr<vramlab::testing::ChildProcess>> ranks_run;
  std::vector<std::string> outs;
  const int processes = std::max(ranks, 1);
  for (int r = 0; r < processes; ++r) {
    std::vector<std::string> args = {"--spec", spec_path};
    if (ranks > 0) {
      args.insert(args.end(), {"--rank", std::to_string(r), "--rendezvous", rendezvous});
    }
    outs.push_back(TempPath(absl::StrCat("rank", r)));
    ranks_run.push_back(Start(BinDir() + "/vramlab-worker", args, outs.back()));
  }
  std::vector<MemoryAnatomy> anatomies;
  for (int r = 0; r < processes; ++r) {
    EXPECT_EQ(Wait(*ranks_run[r]), 0) << "rank " << r << ":\n" << ReadFile(outs[r] + ".log");
    anatomies.push_back(ReportAnatomy(ReadFile(outs[r]), absl::StrCat("rank ", r)));
    unlink(outs[r].c_str());
    unlink((outs[r] + ".log").c_str());
  }
  unlink(spec_path.c_str());
  return anatomies;
}

// vramlab-estimate's MemoryEstimate of `spec`.
inline MemoryEstimate Estimate(const ExperimentSpec& spec) {
  const std::string spec_path = TempPath("estimate-spec");
  const std::string out_path = TempPath("estimate-out");
  WriteFile(spec_path, ToJson(spec));
  EXPECT_EQ(Wait(*Start(BinDir() + "/vramlab-estimate", {"--spec", spec_path}, out_path)), 0)
      << ReadFile(out_path + ".log");
  MemoryEstimate estimate;
  const std::string json = ReadFile(out_path);
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &estimate).ok()) << json;
  for (const std::string& path : {spec_path, out_path, out_path + ".log"}) unlink(path.c_str());
  return estimate;
}

struct Case {
  std::string name;
  vramlab::v1::Sharding sharding;
  bool reshard_after_forward;
  bool qlora = false;    // QLORA in BFLOAT16 instead of LORA in FLOAT32
  bool prefetch = true;  // SHARD_FULL's parallel.prefetch
};

inline ExperimentSpec LoraSpec(const Case& c) {
  ExperimentSpec spec;
  spec.set_device(vramlab::v1::CPU);
  spec.mutable_model()->set_preset("tiny");
  auto* t = spec.mutable_training();
  t->set_micro_batch_size(1);
  // QLoRA on the CPU holds its full-precision projections during LOAD (qlora.h): a longer
  // sequence puts the peak after the first step, where the ledger's categories are read.
  t->set_seq_len(c.qlora ? 128 : 16);
  t->set_steps(2);
  t->set_dtype(c.qlora ? vramlab::v1::BFLOAT16 : vramlab::v1::FLOAT32);
  t->mutable_optimizer()->set_kind(vramlab::v1::ADAMW);
  t->mutable_adapter()->set_kind(c.qlora ? vramlab::v1::QLORA : vramlab::v1::LORA);
  // Rank 32: the adapters' AdamW state (which exists from the second step on) then outweighs the
  // staging buffers a Gloo collective of the first step may still hold, so the peak moment falls
  // after the first step (at rank 4 it fell in the first step in 6 of 30 runs under load).
  t->mutable_adapter()->set_rank(32);
  spec.mutable_parallel()->set_world_size(kRanks);
  spec.mutable_parallel()->set_sharding(c.sharding);
  spec.mutable_parallel()->set_reshard_after_forward(c.reshard_after_forward);
  if (!c.prefetch) spec.mutable_parallel()->set_prefetch(false);
  return spec;
}

// LoraSpec's run without the adapter (full fine-tuning of the tiny model), without reshard.
inline ExperimentSpec FullSpec(vramlab::v1::Sharding sharding) {
  ExperimentSpec spec = LoraSpec(Case{"", sharding, false});
  spec.mutable_training()->clear_adapter();
  return spec;
}

// The rank whose optimizer state in the ledger at its peak is the most (the lowest such rank):
// under SHARD_OPTIMIZER and SHARD_GRADIENTS the busiest owner, the one the estimate is of.
inline int MostState(const std::vector<MemoryAnatomy>& ranks) {
  int most = 0;
  for (int r = 1; r < static_cast<int>(ranks.size()); ++r) {
    if (ranks[r].at_peak_allocated().categories().optimizer_state_bytes() >
        ranks[most].at_peak_allocated().categories().optimizer_state_bytes()) {
      most = r;
    }
  }
  return most;
}

// One rank's model states against the estimate's per-rank anatomy, to the byte: its peak follows
// the first step (fatal otherwise: call it under ASSERT_NO_FATAL_FAILURE), its weights (in the
// anatomy, and in the ledger at the peak unless QLoRA's, whose lookup tables the ledger counts
// with the weights) and gathered parameters; under SHARD_FULL its communication buffers; under
// SHARD_FULL and SHARD_NONE, where every rank holds the estimate's share, the optimizer state in
// the ledger at the peak.
inline void ExpectRankStatesMatch(const Case& c, const MemoryEstimate& estimate,
                                  const MemoryAnatomy& m) {
  const MemoryAnatomy& p = estimate.parallel().anatomy();
  const vramlab::v1::CategoryBytes& held = m.at_peak_allocated().categories();
  ASSERT_GE(m.at_peak_allocated().step(), 1) << "the peak precedes the optimizer state";
  EXPECT_EQ(p.weights_bytes(), m.weights_bytes());
  if (!c.qlora) EXPECT_EQ(p.weights_bytes(), held.weights_bytes());
  EXPECT_EQ(estimate.parallel().gathered_parameters_bytes(), m.gathered_parameters_bytes());
  if (c.sharding == vramlab::v1::SHARD_FULL) {
    EXPECT_EQ(estimate.parallel().communication_buffer_bytes(), m.communication_buffers_bytes());
  }
  if (c.sharding == vramlab::v1::SHARD_FULL || c.sharding == vramlab::v1::SHARD_NONE) {
    EXPECT_EQ(p.optimizer_state_bytes(), held.optimizer_state_bytes());
  }
}

}  // namespace vramlab::rank_runs

#endif  // VRAMLAB_TESTS_ESTIMATE_RANK_RUNS_H_
