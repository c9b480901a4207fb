// The estimator against the real worker on the CPU, where the worker's counting allocator
// measures every tensor exactly: weights, gradients and optimizer state must equal the estimate
// to the byte; activations and the peak must be within the tolerances below (measured with these
// specs; see docs/ESTIMATOR.md, "Accuracy").
//
// Both sides are the real binaries: vramlab-worker (runs the spec, prints WorkerEvent JSON lines)
// and vramlab-estimate (prints the MemoryEstimate JSON).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryAnatomy;
using vramlab::v1::MemoryEstimate;
using vramlab::v1::WorkerEvent;

// Relative tolerances, |predicted - measured| / measured, for the tensors the estimator models
// moment by moment rather than exactly. The estimator's CPU activation model follows the LibTorch
// that CI builds with (1.13.1): measured there with these cases, activations -1.8% .. +8.4% and
// peak -1.3% .. +5.5%; the widest is checkpointing every layer with the chunked loss (the others
// are within 2%). LibTorch 2.x's CPU kernels keep less alive: on the GPU host's LibTorch 2.11
// (2026-12-01) every case measured 0.3-0.5 MB (6-15%) fewer activation bytes than 1.13 does
// against the same estimate — activations +4.0% .. +14.5%, peak +2.8% .. +9.3% — so a worker that
// reports LibTorch 2 is held to those, with the same headroom. The GPU estimate is calibrated on
// GPU runs instead (testdata/estimator/fit_calibration.jsonl).
struct Tolerances {
  double activations;
  double peak;
};
Tolerances TolerancesFor(const std::string& torch_version) {
  if (absl::StartsWith(torch_version, "1.")) return {0.10, 0.06};
  return {0.17, 0.11};
}

std::string BinDir() {
  const char* dir = std::getenv("VRAMLAB_BIN_DIR");
  return dir != nullptr ? dir : VRAMLAB_BIN_DIR;
}

struct ProcessOutput {
  int exit_code = -1;
  std::string stdout_text;
};

// Runs `binary --spec <file holding spec_json>`, stderr discarded.
ProcessOutput RunWithSpec(const std::string& binary, const std::string& spec_json) {
  char path[] = "/tmp/vramlab-estimate-spec-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, spec_json.data(), spec_json.size()), static_cast<ssize_t>(spec_json.size()));
  close(fd);
  const vramlab::testing::ChildResult ended =
      vramlab::testing::RunChild({.argv = {binary, "--spec", path}, .stderr_file = "/dev/null"});
  ProcessOutput out;
  out.stdout_text = ended.out;
  out.exit_code = ended.exit_code;
  unlink(path);
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(message, &json).ok());
  return json;
}

struct Measured {
  MemoryAnatomy anatomy;
  int64_t parameter_count = 0;
  std::string torch_version;  // the worker's `started` event
};

Measured RunWorker(const ExperimentSpec& spec) {
  const ProcessOutput out = RunWithSpec(BinDir() + "/vramlab-worker", ToJson(spec));
  EXPECT_EQ(out.exit_code, 0) << out.stdout_text.substr(0, 2000);
  Measured measured;
  bool have_report = false;
  for (absl::string_view line : absl::StrSplit(out.stdout_text, '\n', absl::SkipEmpty())) {
    WorkerEvent event;
    const auto status = google::protobuf::util::JsonStringToMessage(std::string(line), &event);
    EXPECT_TRUE(status.ok()) << status.ToString() << ": " << line;
    if (event.has_started()) measured.torch_version = event.started().torch_version();
    if (event.has_report()) {
      measured.anatomy = event.report().anatomy();
      measured.parameter_count = event.report().parameter_count();
      have_report = true;
    }
  }
  EXPECT_TRUE(have_report) << "no report event:\n" << out.stdout_text.substr(0, 2000);
  return measured;
}

MemoryEstimate RunEstimator(const ExperimentSpec& spec) {
  const ProcessOutput out = RunWithSpec(BinDir() + "/vramlab-estimate", ToJson(spec));
  EXPECT_EQ(out.exit_code, 0);
  MemoryEstimate estimate;
  const auto status = google::protobuf::util::JsonStringToMessage(out.stdout_text, &estimate);
  EXPECT_TRUE(status.ok()) << status.ToString() << ": " << out.stdout_text;
  return estimate;
}

struct Case {
  std::string name;
  ExperimentSpec spec;
};

ExperimentSpec TinyCpu(vramlab::v1::DType dtype, vramlab::v1::OptimizerKind optimizer) {
  ExperimentSpec spec;
  spec.set_device(vramlab::v1::CPU);
  spec.mutable_model()->set_preset("tiny");
  auto* t = spec.mutable_training();
  t->set_micro_batch_size(2);
  t->set_seq_len(128);
  t->set_steps(2);
  t->set_dtype(dtype);
  t->set_attention(vramlab::v1::EAGER);
  t->mutable_optimizer()->set_kind(optimizer);
  return spec;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"fp32_adamw_eager_full", TinyCpu(vramlab::v1::FLOAT32, vramlab::v1::ADAMW)});
  {
    Case c{"bf16_master_accum2", TinyCpu(vramlab::v1::BFLOAT16, vramlab::v1::ADAMW_FP32_MASTER)};
    c.spec.mutable_training()->set_grad_accum_steps(2);
    cases.push_back(c);
  }
  {
    Case c{"fp32_8bit_ckpt1_chunked", TinyCpu(vramlab::v1::FLOAT32, vramlab::v1::ADAMW_8BIT)};
    c.spec.mutable_training()->set_checkpoint_every_k_layers(1);
    c.spec.mutable_training()->set_loss(vramlab::v1::CHUNKED);
    c.spec.mutable_training()->set_loss_chunk_tokens(64);
    cases.push_back(c);
  }
  {
    Case c{"fp32_sgd_ckpt2_offload", TinyCpu(vramlab::v1::FLOAT32, vramlab::v1::SGD)};
    c.spec.mutable_training()->set_checkpoint_every_k_layers(2);
    c.spec.mutable_training()->mutable_optimizer()->set_offload_to_cpu(true);
    cases.push_back(c);
  }
  {
    Case c{"bf16_adamw_in_backward", TinyCpu(vramlab::v1::BFLOAT16, vramlab::v1::ADAMW)};
    c.spec.mutable_training()->mutable_optimizer()->set_in_backward(true);
    cases.push_back(c);
  }
  {
    Case c{"bf16_adamw_batch4_seq64", TinyCpu(vramlab::v1::BFLOAT16, vramlab::v1::ADAMW)};
    c.spec.mutable_training()->set_micro_batch_size(4);
    c.spec.mutable_training()->set_seq_len(64);
    cases.push_back(c);
  }
  for (auto kind : {vramlab::v1::LORA, vramlab::v1::QLORA}) {
    const bool qlora = kind == vramlab::v1::QLORA;
    Case c{qlora ? "bf16_qlora_r8_ckpt1" : "fp32_lora_r8",
           TinyCpu(qlora ? vramlab::v1::BFLOAT16 : vramlab::v1::FLOAT32, vramlab::v1::ADAMW)};
    c.spec.mutable_training()->mutable_adapter()->set_kind(kind);
    if (qlora) c.spec.mutable_training()->set_checkpoint_every_k_layers(1);
    cases.push_back(c);
  }
  // Adapters with checkpointing and the chunked loss at a longer sequence, on a model whose MLP
  // is wide enough that a wrapped MLP projection's backward (with every tensor the recomputed
  // layer saved) is the peak, as for 7B at long sequences on the GPU: hidden 256, intermediate
  // 8192, 2 heads (1 KV head), 2 layers, vocabulary 2048; 2048 tokens.
  for (auto kind : {vramlab::v1::QLORA, vramlab::v1::LORA}) {
    const bool qlora = kind == vramlab::v1::QLORA;
    Case c{qlora ? "bf16_qlora_ckpt1_chunked_seq2048" : "bf16_lora_ckpt1_chunked_seq2048",
           TinyCpu(vramlab::v1::BFLOAT16, vramlab::v1::ADAMW)};
    c.spec.mutable_model()->clear_preset();
    auto* config = c.spec.mutable_model()->mutable_config();
    config->set_vocab_size(2048);
    config->set_hidden_size(256);
    config->set_intermediate_size(8192);
    config->set_num_hidden_layers(2);
    config->set_num_attention_heads(2);
    config->set_num_key_value_heads(1);
    config->set_max_position_embeddings(4096);
    config->set_tie_word_embeddings(true);
    auto* t = c.spec.mutable_training();
    t->set_micro_batch_size(1);
    t->set_seq_len(2048);
    t->set_checkpoint_every_k_layers(1);
    t->set_loss(vramlab::v1::CHUNKED);
    t->set_loss_chunk_tokens(256);
    t->mutable_adapter()->set_kind(kind);
    t->mutable_adapter()->set_rank(8);
    t->mutable_adapter()->set_alpha(16);
    cases.push_back(c);
  }
  // One tiny model per family, every feature on (common/spec/model_family.h): llama with llama3
  // rotary scaling and q/k/v/o and MLP biases; mistral with a 32-token window shorter than the
  // 128-token sequence; qwen3 with q/k norm, head_dim 32 (not hidden/heads = 16) and a window on
  // its second layer only, full and with LoRA.
  auto family = [](const char* name, const char* model_type, vramlab::v1::DType dtype) {
    Case c{name, TinyCpu(dtype, vramlab::v1::ADAMW)};
    c.spec.mutable_model()->clear_preset();
    auto* config = c.spec.mutable_model()->mutable_config();
    config->set_model_type(model_type);
    config->set_vocab_size(512);
    config->set_hidden_size(64);
    config->set_intermediate_size(176);
    config->set_num_hidden_layers(2);
    config->set_num_attention_heads(4);
    config->set_num_key_value_heads(2);
    config->set_max_position_embeddings(2048);
    return c;
  };
  {
    Case c = family("llama_llama3_bias_fp32", "llama", vramlab::v1::FLOAT32);
    auto* config = c.spec.mutable_model()->mutable_config();
    config->set_attention_bias(true);
    config->set_mlp_bias(true);
    auto* rope = config->mutable_rope_scaling();
    rope->set_rope_type("llama3");
    rope->set_factor(8);
    rope->set_low_freq_factor(1);
    rope->set_high_freq_factor(4);
    rope->set_original_max_position_embeddings(256);
    cases.push_back(c);
  }
  {
    Case c = family("mistral_window32_bf16", "mistral", vramlab::v1::BFLOAT16);
    c.spec.mutable_model()->mutable_config()->set_sliding_window(32);
    cases.push_back(c);
  }
  for (bool lora : {false, true}) {
    Case c = family(lora ? "qwen3_qknorm_window_lora_fp32" : "qwen3_qknorm_window_bf16", "qwen3",
                    lora ? vramlab::v1::FLOAT32 : vramlab::v1::BFLOAT16);
    auto* config = c.spec.mutable_model()->mutable_config();
    config->set_head_dim(32);
    config->set_tie_word_embeddings(true);
    config->set_use_sliding_window(true);
    config->set_sliding_window(32);
    config->set_max_window_layers(1);
    if (lora) c.spec.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
    cases.push_back(c);
  }
  // The other families with an adapter and the activation savers: llama (llama3 scaling, no
  // bias) under QLoRA with checkpointing; mistral (window 32) under LoRA with checkpointing and
  // the chunked loss; qwen3 (q/k norm, head_dim 32) under QLoRA with checkpointing.
  {
    Case c = family("llama_llama3_qlora_ckpt1_bf16", "llama", vramlab::v1::BFLOAT16);
    auto* rope = c.spec.mutable_model()->mutable_config()->mutable_rope_scaling();
    rope->set_rope_type("llama3");
    rope->set_factor(8);
    rope->set_low_freq_factor(1);
    rope->set_high_freq_factor(4);
    rope->set_original_max_position_embeddings(256);
    c.spec.mutable_training()->set_checkpoint_every_k_layers(1);
    c.spec.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::QLORA);
    cases.push_back(c);
  }
  {
    Case c = family("mistral_window32_lora_ckpt1_chunked_fp32", "mistral", vramlab::v1::FLOAT32);
    c.spec.mutable_model()->mutable_config()->set_sliding_window(32);
    auto* t = c.spec.mutable_training();
    t->set_checkpoint_every_k_layers(1);
    t->set_loss(vramlab::v1::CHUNKED);
    t->set_loss_chunk_tokens(64);
    t->mutable_adapter()->set_kind(vramlab::v1::LORA);
    cases.push_back(c);
  }
  {
    Case c = family("qwen3_qknorm_qlora_ckpt1_bf16", "qwen3", vramlab::v1::BFLOAT16);
    c.spec.mutable_model()->mutable_config()->set_head_dim(32);
    c.spec.mutable_training()->set_checkpoint_every_k_layers(1);
    c.spec.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::QLORA);
    cases.push_back(c);
  }
  return cases;
}

double RelativeError(int64_t predicted, int64_t measured) {
  return measured == 0 ? (predicted == 0 ? 0.0 : INFINITY)
                       : std::fabs(static_cast<double>(predicted - measured)) / measured;
}

class EstimateVsWorkerTest : public ::testing::TestWithParam<Case> {};

TEST_P(EstimateVsWorkerTest, MatchesTheCountingAllocator) {
  const Case& c = GetParam();
  const Measured measured = RunWorker(c.spec);
  const MemoryEstimate estimate = RunEstimator(c.spec);
  const MemoryAnatomy& m = measured.anatomy;
  const MemoryAnatomy& p = estimate.anatomy();
  EXPECT_EQ(estimate.parameter_count(), measured.parameter_count);
  EXPECT_EQ(p.weights_bytes(), m.weights_bytes());
  EXPECT_EQ(p.gradients_bytes(), m.gradients_bytes());
  EXPECT_EQ(p.optimizer_state_bytes(), m.optimizer_state_bytes());
  EXPECT_EQ(p.adapter_weights_bytes(), m.adapter_weights_bytes());
  EXPECT_EQ(p.quantization_constants_bytes(), m.quantization_constants_bytes());
  EXPECT_EQ(p.cuda_context_bytes(), 0);
  const Tolerances tolerances = TolerancesFor(measured.torch_version);
  EXPECT_LE(RelativeError(p.activations_bytes(), m.activations_bytes()), tolerances.activations)
      << "activations predicted " << p.activations_bytes() << " measured " << m.activations_bytes();
  EXPECT_LE(RelativeError(p.peak_allocated_bytes(), m.peak_allocated_bytes()), tolerances.peak)
      << "peak predicted " << p.peak_allocated_bytes() << " measured " << m.peak_allocated_bytes();
  // Printed so that the tolerances above stay grounded in numbers anyone can rerun.
  std::printf(
      "%-28s activations %9lld / %9lld (%+.1f%%)  peak %9lld / %9lld (%+.1f%%)  temporaries %lld / "
      "%lld\n",
      c.name.c_str(), static_cast<long long>(p.activations_bytes()),
      static_cast<long long>(m.activations_bytes()),
      100.0 * (p.activations_bytes() - m.activations_bytes()) /
          std::max<int64_t>(1, m.activations_bytes()),
      static_cast<long long>(p.peak_allocated_bytes()),
      static_cast<long long>(m.peak_allocated_bytes()),
      100.0 * (p.peak_allocated_bytes() - m.peak_allocated_bytes()) /
          std::max<int64_t>(1, m.peak_allocated_bytes()),
      static_cast<long long>(p.temporary_buffers_bytes()),
      static_cast<long long>(m.temporary_buffers_bytes()));
}

INSTANTIATE_TEST_SUITE_P(TinyCpu, EstimateVsWorkerTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
