// Test support for real parallel runs: starts vramlab-worker processes of this tree as the ranks
// of a run (Gloo on the CPU, a free loopback port) or as one process, collects their events and
// compares their losses and saved parameters. The specs train the tiny model (or another) in
// FLOAT32 on the CPU with SGD.
#ifndef VRAMLAB_WORKER_PARALLEL_TESTING_RANK_PROCESSES_H_
#define VRAMLAB_WORKER_PARALLEL_TESTING_RANK_PROCESSES_H_

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "tests/support/child_process.h"
#include "tests/support/loopback_port.h"
#include "worker/model/init.h"
#include "worker/model/qwen2_model.h"
#include "worker/safetensors/safetensors_file.h"
#include "worker/safetensors/safetensors_writer.h"
#include "worker/spec/experiment_spec.h"
#include "worker/train/spec_conversions.h"

namespace vramlab::worker::testing {

inline constexpr int kRanks = 2;
inline constexpr int kRowsPerRank = 2;
inline constexpr int kSteps = 3;
inline constexpr double kTolerance = 1e-6;

using vramlab::testing::FreeLoopbackPort;  // rank 0 binds it again

class ScratchDir {
 public:
  ScratchDir() {
    char path[] = "/tmp/vramlab-parallel-test-XXXXXX";
    if (mkdtemp(path) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = path;
  }
  ~ScratchDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct FinishedWorker {
  int exit_code = -1;  // -1: killed (it did not end in time) or crashed
  std::vector<nlohmann::json> events;
};

// Starts the worker of this tree: --spec SPEC_FILE ARGS..., stdout to OUT_FILE, stderr to
// OUT_FILE.log.
inline std::unique_ptr<vramlab::testing::ChildProcess> StartWorker(
    const std::string& spec_file, const std::string& out_file,
    const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(VRAMLAB_BIN_DIR) + "/vramlab-worker", "--spec",
                                   spec_file};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<vramlab::testing::ChildProcess>(vramlab::testing::ChildOptions{
      .argv = argv, .stdout_file = out_file, .stderr_file = out_file + ".log"});
}

// Waits for every worker; those still running after `limit` (ranks that wait on each other
// forever) are killed and reported with exit code -1.
inline std::vector<FinishedWorker> WaitAll(
    const std::vector<std::unique_ptr<vramlab::testing::ChildProcess>>& workers,
    const std::vector<std::string>& out_files, std::chrono::seconds limit) {
  std::vector<FinishedWorker> finished(workers.size());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    finished[i].exit_code = workers[i]->Wait(left).exit_code;
    std::ifstream in(out_files[i]);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) finished[i].events.push_back(nlohmann::json::parse(line));
    }
  }
  return finished;
}

// One worker's WaitAll.
inline FinishedWorker WaitOne(std::unique_ptr<vramlab::testing::ChildProcess> worker,
                              const std::string& out_file, std::chrono::seconds limit) {
  std::vector<std::unique_ptr<vramlab::testing::ChildProcess>> workers;
  workers.push_back(std::move(worker));
  return WaitAll(workers, {out_file}, limit)[0];
}

inline std::string ReadLog(const std::string& out_file) {
  std::ifstream in(out_file + ".log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::vector<double> StepLosses(const FinishedWorker& worker) {
  std::vector<double> losses;
  for (const auto& event : worker.events) {
    if (event.contains("step")) losses.push_back(event["step"]["loss"].get<double>());
  }
  return losses;
}

// What a run trains besides its micro-batch size and parallel settings.
struct RunShape {
  std::string model = R"({"preset": "tiny", "initSeed": 5})";
  std::string dtype = "FLOAT32";
  std::string adapter;  // the spec's training.adapter object; empty: none
  int grad_accum_steps = 2;
  int checkpoint_every_k_layers = 0;
  std::string optimizer = R"({"kind": "SGD", "learningRate": 0.05})";  // training.optimizer
};

// On the CPU, by default the tiny model in FLOAT32 with two micro-batches a step (so gradients
// also accumulate). SGD with momentum (sharded state under SHARD_OPTIMIZER/GRADIENTS/FULL) moves a
// parameter in proportion to its gradient, so the rounding differences of averaged gradients stay
// at their own size; AdamW divides by the gradient's magnitude and turns them, in elements whose
// gradient is near zero, into parameter differences of up to the learning rate (docs/PARALLEL.md).
inline std::string Spec(int micro_batch_size, const std::string& parallel,
                        const RunShape& shape = {}) {
  return R"({"model": )" + shape.model + R"(, "device": "CPU",
             "training": {"microBatchSize": )" +
         std::to_string(micro_batch_size) + R"(, "gradAccumSteps": )" +
         std::to_string(shape.grad_accum_steps) + R"(, "seqLen": 16, "steps": )" +
         std::to_string(kSteps) + R"(, "dtype": ")" + shape.dtype +
         R"(", "checkpointEveryKLayers": )" + std::to_string(shape.checkpoint_every_k_layers) +
         R"(, "data": {"seed": 11}, "optimizer": )" + shape.optimizer +
         (shape.adapter.empty() ? "" : R"(, "adapter": )" + shape.adapter) + "}" +
         (parallel.empty() ? "" : R"(, "parallel": )" + parallel) + "}";
}

// Two or more micro-batches a step, every k-th layer checkpointed (0: none), an adapter (the
// spec's training.adapter object; empty: none) and a model (the spec's model object; empty: the
// tiny preset).
inline RunShape ShapeOf(int grad_accum_steps, int checkpoint_every_k_layers,
                        const std::string& adapter = "", const std::string& model = "") {
  RunShape shape;
  shape.grad_accum_steps = grad_accum_steps;
  shape.checkpoint_every_k_layers = checkpoint_every_k_layers;
  shape.adapter = adapter;
  if (!model.empty()) shape.model = model;
  return shape;
}

inline RunShape WithDtype(const std::string& dtype) {
  RunShape shape;
  shape.dtype = dtype;
  return shape;
}

inline RunShape WithAdapter(const std::string& adapter) {
  RunShape shape;
  shape.adapter = adapter;
  return shape;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Largest |a - b| over every tensor of two parameter files with the same names and shapes
// (tensors of no elements compare equal).
inline double LargestDifference(const std::string& a_path, const std::string& b_path) {
  const auto a = SafetensorsFile::Open(a_path);
  const auto b = SafetensorsFile::Open(b_path);
  EXPECT_EQ(a->entries().size(), b->entries().size());
  double largest = 0;
  for (const auto& [name, entry] : a->entries()) {
    const torch::Tensor x = a->View(name);
    const torch::Tensor y = b->View(name);
    EXPECT_EQ(x.sizes(), y.sizes()) << name;
    if (x.numel() == 0 || x.sizes() != y.sizes()) continue;  // e.g. QLoRA's emptied base weights
    largest = std::max(largest,
                       (x.to(torch::kFloat64) - y.to(torch::kFloat64)).abs().max().item<double>());
  }
  return largest;
}

inline std::string RankOutput(const ScratchDir& dir, int rank) {
  return dir.File("rank" + std::to_string(rank) + ".jsonl");
}

// The parameters as the worker initializes them before its first step.
inline void WriteInitialParameters(const std::string& spec_json, const std::string& path) {
  const ExperimentSpec spec = ParseExperimentSpec(spec_json);
  const DecoderConfig config = ResolveModelConfig(spec.model);
  Qwen2ForCausalLM model(config, ToModelOptions(spec.training, torch::Device(torch::kCPU)));
  InitializeWeights(*model, spec.model.init_seed, config.initializer_range);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& named : model->named_parameters())
    tensors.emplace_back(named.key(), named.value().detach());
  WriteSafetensors(path, tensors);
}

// Starts kRanks ranks of `spec_json` (rank R saves its parameters to rankR.safetensors in `dir`)
// and waits for all of them.
inline std::vector<FinishedWorker> RunRanks(const ScratchDir& dir, const std::string& spec_json) {
  const std::string spec = dir.File("parallel.json");
  WriteFile(spec, spec_json);
  const std::string rendezvous = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<std::unique_ptr<vramlab::testing::ChildProcess>> workers;
  std::vector<std::string> outs;
  for (int rank = 0; rank < kRanks; ++rank) {
    outs.push_back(RankOutput(dir, rank));
    workers.push_back(StartWorker(
        spec, outs.back(),
        {"--rank", std::to_string(rank), "--rendezvous", rendezvous, "--save-parameters",
         dir.File("rank" + std::to_string(rank) + ".safetensors")}));
  }
  return WaitAll(workers, outs, std::chrono::seconds(300));
}

// One process of `spec_json` in `dir` (single.json, single.jsonl, single.safetensors).
inline FinishedWorker RunSingle(const ScratchDir& dir, const std::string& spec_json) {
  const std::string spec = dir.File("single.json");
  WriteFile(spec, spec_json);
  const std::string out = dir.File("single.jsonl");
  return WaitOne(StartWorker(spec, out, {"--save-parameters", dir.File("single.safetensors")}), out,
                 std::chrono::seconds(300));
}

// Every rank's losses and saved parameters against the single process's in `reference_dir`
// (single.safetensors); returns the largest parameter difference over the ranks.
inline double ExpectRanksMatch(const ScratchDir& dir, const std::vector<FinishedWorker>& ranks,
                               const FinishedWorker& reference, const ScratchDir& reference_dir) {
  const std::vector<double> reference_losses = StepLosses(reference);
  EXPECT_EQ(reference_losses.size(), static_cast<size_t>(kSteps));
  double largest = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    if (ranks[rank].exit_code != kExitSucceeded) continue;
    const std::vector<double> losses = StepLosses(ranks[rank]);
    EXPECT_EQ(losses.size(), reference_losses.size());
    for (size_t step = 0; step < losses.size() && step < reference_losses.size(); ++step) {
      EXPECT_NEAR(losses[step], reference_losses[step], kTolerance) << "step " << step;
    }
    const double difference =
        LargestDifference(dir.File("rank" + std::to_string(rank) + ".safetensors"),
                          reference_dir.File("single.safetensors"));
    EXPECT_LE(difference, kTolerance);
    largest = std::max(largest, difference);
  }
  return largest;
}

// The memory anatomy of the run's report event.
inline nlohmann::json ReportAnatomy(const FinishedWorker& worker) {
  for (const auto& event : worker.events) {
    if (event.contains("report")) return event["report"]["anatomy"];
  }
  ADD_FAILURE() << "no report event";
  return nlohmann::json::object();
}

// A category's live bytes in the allocation ledger at the end of the first step's optimizer step
// (the phase event's memory.categories). Unlike the anatomy's growth-based fields, it is not moved
// by frees of older blocks during the phase (Gloo releases a finished collective's staging on its
// own threads, possibly a phase later).
inline int64_t LedgerBytesAfterFirstStep(const FinishedWorker& worker, const char* field) {
  for (const auto& event : worker.events) {
    if (!event.contains("phase")) continue;
    const nlohmann::json& phase = event["phase"];
    if (phase.value("phase", "") == "OPTIMIZER_STEP" && phase.value("edge", "") == "END" &&
        phase.value("step", 0) == 0) {
      return std::stoll(phase["memory"]["categories"][field].get<std::string>());
    }
  }
  ADD_FAILURE() << "no end of the first OPTIMIZER_STEP";
  return -1;
}

inline int64_t AnatomyBytes(const nlohmann::json& anatomy, const char* field) {
  return anatomy.contains(field) ? std::stoll(anatomy[field].get<std::string>()) : 0;
}

}  // namespace vramlab::worker::testing

#endif  // VRAMLAB_WORKER_PARALLEL_TESTING_RANK_PROCESSES_H_
