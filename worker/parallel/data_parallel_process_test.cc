// Real parallel runs: two vramlab-worker processes of the tree joined through c10d (Gloo on the
// CPU) train the tiny model in FLOAT32 and must match one process that takes the whole global
// micro-batch: the same loss at every step and the same parameters after the last, within 1e-6,
// on every rank, for each sharding the worker implements.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/exit_codes.h"
#include "worker/model/init.h"
#include "worker/model/qwen2_model.h"
#include "worker/safetensors/safetensors_file.h"
#include "worker/safetensors/safetensors_writer.h"
#include "worker/spec/experiment_spec.h"
#include "worker/train/spec_conversions.h"

namespace vramlab::worker {
namespace {

constexpr int kRanks = 2;
constexpr int kRowsPerRank = 2;
constexpr int kSteps = 3;
constexpr double kTolerance = 1e-6;

// A port that was free a moment ago (bound to port 0 and released); rank 0 binds it again.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot find a free loopback port");
  }
  close(fd);
  return ntohs(address.sin_port);
}

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
pid_t StartWorker(const std::string& spec_file, const std::string& out_file, const std::vector<std::string>& args) {
  const std::string binary = std::string(VRAMLAB_BIN_DIR) + "/vramlab-worker";
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int log = open((out_file + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    std::vector<const char*> argv = {binary.c_str(), "--spec", spec_file.c_str()};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    argv.push_back(nullptr);
    execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  if (pid < 0) throw std::runtime_error("fork failed");
  return pid;
}

// Waits for every pid; one still running after `limit` (ranks that wait on each other forever)
// is killed and reported with exit code -1.
std::vector<FinishedWorker> WaitAll(const std::vector<pid_t>& pids, const std::vector<std::string>& out_files,
                                    std::chrono::seconds limit) {
  std::vector<FinishedWorker> finished(pids.size());
  std::vector<bool> done(pids.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (size_t remaining = pids.size(); remaining > 0;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = true;
      --remaining;
      if (WIFEXITED(status)) finished[i].exit_code = WEXITSTATUS(status);
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          done[i] = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    std::ifstream in(out_files[i]);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) finished[i].events.push_back(nlohmann::json::parse(line));
    }
  }
  return finished;
}

std::string ReadLog(const std::string& out_file) {
  std::ifstream in(out_file + ".log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<double> StepLosses(const FinishedWorker& worker) {
  std::vector<double> losses;
  for (const auto& event : worker.events) {
    if (event.contains("step")) losses.push_back(event["step"]["loss"].get<double>());
  }
  return losses;
}

// The tiny model in FLOAT32 on the CPU, two micro-batches a step (so gradients also accumulate).
// SGD with momentum (sharded state under SHARD_OPTIMIZER/GRADIENTS) moves a parameter in
// proportion to its gradient, so the rounding differences of averaged gradients stay at their own
// size; AdamW divides by the gradient's magnitude and turns them, in elements whose gradient is
// near zero, into parameter differences of up to the learning rate (docs/PARALLEL.md).
std::string Spec(int micro_batch_size, const std::string& parallel, const std::string& dtype = "FLOAT32",
                 const std::string& adapter = "") {
  return R"({"model": {"preset": "tiny", "initSeed": 5}, "device": "CPU",
             "training": {"microBatchSize": )" +
         std::to_string(micro_batch_size) + R"(, "gradAccumSteps": 2, "seqLen": 16, "steps": )" +
         std::to_string(kSteps) + R"(, "dtype": ")" + dtype + R"(", "data": {"seed": 11},
                          "optimizer": {"kind": "SGD", "learningRate": 0.05})" +
         (adapter.empty() ? "" : R"(, "adapter": )" + adapter) + "}" +
         (parallel.empty() ? "" : R"(, "parallel": )" + parallel) + "}";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Largest |a - b| over every tensor of two parameter files with the same names and shapes.
double LargestDifference(const std::string& a_path, const std::string& b_path) {
  const auto a = SafetensorsFile::Open(a_path);
  const auto b = SafetensorsFile::Open(b_path);
  EXPECT_EQ(a->entries().size(), b->entries().size());
  double largest = 0;
  for (const auto& [name, entry] : a->entries()) {
    const torch::Tensor x = a->View(name);
    const torch::Tensor y = b->View(name);
    EXPECT_EQ(x.sizes(), y.sizes()) << name;
    largest = std::max(largest, (x.to(torch::kFloat64) - y.to(torch::kFloat64)).abs().max().item<double>());
  }
  return largest;
}

std::string RankOutput(const ScratchDir& dir, int rank) { return dir.File("rank" + std::to_string(rank) + ".jsonl"); }

// Starts kRanks ranks of `spec_json` (rank R saves its parameters to rankR.safetensors in `dir`)
// and waits for all of them.
std::vector<FinishedWorker> RunRanks(const ScratchDir& dir, const std::string& spec_json) {
  const std::string spec = dir.File("parallel.json");
  WriteFile(spec, spec_json);
  const std::string rendezvous = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int rank = 0; rank < kRanks; ++rank) {
    outs.push_back(RankOutput(dir, rank));
    pids.push_back(StartWorker(spec, outs.back(),
                               {"--rank", std::to_string(rank), "--rendezvous", rendezvous, "--save-parameters",
                                dir.File("rank" + std::to_string(rank) + ".safetensors")}));
  }
  return WaitAll(pids, outs, std::chrono::seconds(300));
}

class DataParallelProcessTest : public ::testing::TestWithParam<const char*> {
 protected:
  // The single process's losses and parameters, computed once for all shardings.
  static void SetUpTestSuite() {
    reference_dir_ = new ScratchDir();
    const std::string spec = reference_dir_->File("single.json");
    WriteFile(spec, Spec(kRanks * kRowsPerRank, ""));
    const std::string out = reference_dir_->File("single.jsonl");
    const pid_t pid = StartWorker(spec, out, {"--save-parameters", reference_dir_->File("single.safetensors")});
    reference_ = new FinishedWorker(WaitAll({pid}, {out}, std::chrono::seconds(300))[0]);
    reference_log_ = new std::string(ReadLog(out));
    WriteInitialParameters(Spec(kRanks * kRowsPerRank, ""), reference_dir_->File("initial.safetensors"));
  }

  // The parameters as the worker initializes them before its first step.
  static void WriteInitialParameters(const std::string& spec_json, const std::string& path) {
    const ExperimentSpec spec = ParseExperimentSpec(spec_json);
    const Qwen2Config config = ResolveModelConfig(spec.model);
    Qwen2ForCausalLM model(config, ToModelOptions(spec.training, torch::Device(torch::kCPU)));
    InitializeWeights(*model, spec.model.init_seed, config.initializer_range);
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& named : model->named_parameters()) tensors.emplace_back(named.key(), named.value().detach());
    WriteSafetensors(path, tensors);
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete reference_log_;
    delete reference_dir_;
  }

  static ScratchDir* reference_dir_;
  static FinishedWorker* reference_;
  static std::string* reference_log_;
};

ScratchDir* DataParallelProcessTest::reference_dir_ = nullptr;
FinishedWorker* DataParallelProcessTest::reference_ = nullptr;
std::string* DataParallelProcessTest::reference_log_ = nullptr;

TEST_P(DataParallelProcessTest, TwoRanksTrainAsOneProcessWithTheGlobalBatch) {
  ASSERT_EQ(reference_->exit_code, kExitSucceeded) << *reference_log_;
  const std::vector<double> reference_losses = StepLosses(*reference_);
  ASSERT_EQ(reference_losses.size(), static_cast<size_t>(kSteps));

  ScratchDir dir;
  const std::vector<FinishedWorker> ranks =
      RunRanks(dir, Spec(kRowsPerRank, std::string(R"({"worldSize": 2, "sharding": ")") + GetParam() + R"("})"));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    const std::vector<double> losses = StepLosses(ranks[rank]);
    ASSERT_EQ(losses.size(), reference_losses.size());
    for (size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(losses[step], reference_losses[step], kTolerance) << "step " << step;
    }
    EXPECT_LE(LargestDifference(dir.File("rank" + std::to_string(rank) + ".safetensors"),
                                reference_dir_->File("single.safetensors")),
              kTolerance);
  }
  // The training moved the parameters far beyond the tolerance, so matching them is more than
  // matching the initialization.
  EXPECT_GT(LargestDifference(reference_dir_->File("initial.safetensors"), reference_dir_->File("single.safetensors")),
            1000 * kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shardings, DataParallelProcessTest,
                         ::testing::Values("SHARD_NONE", "SHARD_OPTIMIZER", "SHARD_GRADIENTS"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// LoRA: only the adapters train, so the ranks own, average and broadcast a subset of the
// model's parameters.
TEST(DataParallelAdapterTest, LoraRanksTrainAsOneProcessWithTheGlobalBatch) {
  const std::string lora = R"({"kind": "LORA", "rank": 4})";
  ScratchDir dir;
  const std::string single_spec = dir.File("single.json");
  WriteFile(single_spec, Spec(kRanks * kRowsPerRank, "", "FLOAT32", lora));
  const std::string single_out = dir.File("single.jsonl");
  const pid_t single =
      StartWorker(single_spec, single_out, {"--save-parameters", dir.File("single.safetensors")});
  const FinishedWorker reference = WaitAll({single}, {single_out}, std::chrono::seconds(300))[0];
  ASSERT_EQ(reference.exit_code, kExitSucceeded) << ReadLog(single_out);

  const std::vector<FinishedWorker> ranks =
      RunRanks(dir, Spec(kRowsPerRank, R"({"worldSize": 2, "sharding": "SHARD_OPTIMIZER"})", "FLOAT32", lora));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
    const std::vector<double> losses = StepLosses(ranks[rank]);
    ASSERT_EQ(losses.size(), StepLosses(reference).size());
    for (size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(losses[step], StepLosses(reference)[step], kTolerance) << "step " << step;
    }
    EXPECT_LE(LargestDifference(dir.File("rank" + std::to_string(rank) + ".safetensors"), dir.File("single.safetensors")),
              kTolerance);
  }
  // lora_B starts at zero (as PEFT's): trained, it is far from zero.
  const auto trained = SafetensorsFile::Open(dir.File("single.safetensors"));
  double largest_b = 0;
  for (const auto& [name, entry] : trained->entries()) {
    if (name.find("lora_B") != std::string::npos) {
      largest_b = std::max(largest_b, trained->View(name).abs().max().item<double>());
    }
  }
  EXPECT_GT(largest_b, 1000 * kTolerance);
}

// A rank that dies (killed, crashed, or out of memory and exiting) ends the others at their next
// collective with an internal error, rather than leaving them waiting.
TEST(DataParallelRankLossTest, ARankThatDiesEndsTheOthers) {
  ScratchDir dir;
  const std::string spec = dir.File("parallel.json");
  std::string json = Spec(kRowsPerRank, R"({"worldSize": 2})");
  json.replace(json.find(R"("steps": 3)"), 10, R"("steps": 100000)");
  WriteFile(spec, json);
  const std::string rendezvous = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const pid_t survivor = StartWorker(spec, RankOutput(dir, 0), {"--rank", "0", "--rendezvous", rendezvous});
  const pid_t victim = StartWorker(spec, RankOutput(dir, 1), {"--rank", "1", "--rendezvous", rendezvous});
  // Killed once it has finished a step, i.e. mid-run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (bool stepped = false; !stepped && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(RankOutput(dir, 1));
    stepped = std::string(std::istreambuf_iterator<char>(in), {}).find(R"({"step":)") != std::string::npos;
  }
  kill(victim, SIGKILL);
  const std::vector<FinishedWorker> ranks =
      WaitAll({survivor, victim}, {RankOutput(dir, 0), RankOutput(dir, 1)}, std::chrono::seconds(300));
  EXPECT_EQ(ranks[0].exit_code, kExitInternalError) << ReadLog(RankOutput(dir, 0));
  ASSERT_FALSE(ranks[0].events.empty());
  EXPECT_EQ(ranks[0].events.back()["error"]["kind"], "INTERNAL") << ranks[0].events.back();
  EXPECT_LT(StepLosses(ranks[0]).size(), 100000u);
}

// LibTorch 1.13's Gloo has no bfloat16: such tensors travel as float32 copies. The ranks must
// still agree exactly (one process's bfloat16 run rounds differently, so it is no reference).
TEST(DataParallelBfloat16Test, RanksEndWithIdenticalParameters) {
  ScratchDir dir;
  const std::vector<FinishedWorker> ranks =
      RunRanks(dir, Spec(kRowsPerRank, R"({"worldSize": 2, "sharding": "SHARD_GRADIENTS"})", "BFLOAT16"));
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].exit_code, kExitSucceeded) << ReadLog(RankOutput(dir, rank));
  }
  EXPECT_EQ(StepLosses(ranks[0]), StepLosses(ranks[1]));
  EXPECT_EQ(StepLosses(ranks[0]).size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(LargestDifference(dir.File("rank0.safetensors"), dir.File("rank1.safetensors")), 0);
  const auto parameters = SafetensorsFile::Open(dir.File("rank0.safetensors"));
  EXPECT_EQ(parameters->entries().begin()->second.dtype, "BF16");
}

}  // namespace
}  // namespace vramlab::worker
