// Unit tests of the estimator's arithmetic: exact parameter counts and per-category bytes,
// monotonicity in sequence length and batch, the max-fit search, and spec validation.
#include "server/estimate/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;
using vramlab::v1::MemoryEstimate;

constexpr int64_t kGiB = int64_t{1} << 30;

ExperimentSpec Spec(const std::string& preset, int seq = 512, int batch = 1) {
  ExperimentSpec spec;
  spec.mutable_model()->set_preset(preset);
  spec.mutable_training()->set_seq_len(seq);
  spec.mutable_training()->set_micro_batch_size(batch);
  return spec;
}

MemoryEstimate MustEstimate(const ExperimentSpec& spec, int64_t limit = 0) {
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(spec, limit);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : MemoryEstimate();
}

TEST(EstimatorTest, ParameterCountOfEveryPresetMatchesThePublishedModel) {
  // HF num_parameters() of each published checkpoint (common/spec/model_presets.cc); tiny:
  // testdata/README.md (HF-counted).
  const std::vector<std::pair<std::string, int64_t>> expected = {{"qwen2.5-0.5b", 494032768},
                                                                 {"qwen2.5-1.5b", 1543714304},
                                                                 {"qwen2.5-3b", 3085938688},
                                                                 {"qwen2.5-7b", 7615616512},
                                                                 {"llama-3.2-1b", 1235814400},
                                                                 {"llama-3.2-3b", 3212749824},
                                                                 {"llama-3.1-8b", 8030261248},
                                                                 {"mistral-7b-v0.3", 7248023552},
                                                                 {"qwen3-0.6b", 596049920},
                                                                 {"qwen3-1.7b", 1720574976},
                                                                 {"qwen3-4b", 4022468096},
                                                                 {"qwen3-8b", 8190735360},
                                                                 {"tiny", 125504}};
  for (const auto& [preset, count] : expected) {
    EXPECT_EQ(MustEstimate(Spec(preset)).parameter_count(), count) << preset;
  }
  EXPECT_EQ(estimate::PresetNames().size(), expected.size());
}

TEST(EstimatorTest, ExplicitConfigOverridesPresetAndCountsUntiedHead) {
  ExperimentSpec spec = Spec("qwen2.5-7b");
  vramlab::v1::ModelConfig* c = spec.mutable_model()->mutable_config();
  c->set_vocab_size(512);
  c->set_hidden_size(64);
  c->set_intermediate_size(176);
  c->set_num_hidden_layers(2);
  c->set_num_attention_heads(4);
  c->set_num_key_value_heads(2);
  c->set_tie_word_embeddings(false);
  // qwen2-tiny-untied in testdata: 158,272 parameters.
  EXPECT_EQ(MustEstimate(spec).parameter_count(), 158272);
}

TEST(EstimatorTest, WeightsGradientsAndStateOf15BInBf16OnCuda) {
  // Every 1.5B tensor is a multiple of 512 bytes in bf16, so CUDA rounding adds nothing.
  const int64_t p = 1543714304;
  ExperimentSpec spec = Spec("qwen2.5-1.5b");
  struct Case {
    vramlab::v1::OptimizerKind kind;
    int64_t state;
  };
  for (const Case& c :
       {Case{vramlab::v1::ADAMW, 4 * p}, Case{vramlab::v1::ADAMW_FP32_MASTER, 12 * p},
        Case{vramlab::v1::SGD, 2 * p}}) {
    spec.mutable_training()->mutable_optimizer()->set_kind(c.kind);
    const MemoryEstimate e = MustEstimate(spec);
    EXPECT_EQ(e.anatomy().weights_bytes(), 2 * p);
    EXPECT_EQ(e.anatomy().gradients_bytes(), 2 * p);
    EXPECT_EQ(e.anatomy().optimizer_state_bytes(), c.state) << c.kind;
    EXPECT_EQ(e.anatomy().cuda_context_bytes(), 804061184);  // measured, sdpa runs on the H200
  }
}

TEST(EstimatorTest, CpuBytesAreExactPerOptimizerMode) {
  const int64_t p = 125504;
  ExperimentSpec spec = Spec("tiny", 16, 2);
  spec.set_device(vramlab::v1::CPU);
  spec.mutable_training()->set_dtype(vramlab::v1::FLOAT32);
  // 8-bit, per moment: tensors of >= 4096 elements take 1 byte/element + 4 bytes per
  // 256-element block; smaller ones fp32. Embedding 32768 -> 33280; per layer q 4096 -> 4160,
  // q bias 64 -> 256, k and v 2048 -> 8192 each, their biases 32 -> 128 each, o 4096 -> 4160,
  // gate/up/down 11264 -> 11440 each, two norms 64 -> 256 each: 60048; final norm 256. Plus the
  // two fp32 code maps (256 values + 255 midpoints each).
  const int64_t adam8_moment = 33280 + 2 * 60048 + 256;
  const int64_t adam8_maps = 2 * (256 + 255) * 4;
  struct Case {
    vramlab::v1::OptimizerKind kind;
    int64_t state;
  };
  for (const Case& c : {Case{vramlab::v1::ADAMW, 8 * p},
                        Case{vramlab::v1::ADAMW_FP32_MASTER, 12 * p}, Case{vramlab::v1::SGD, 4 * p},
                        Case{vramlab::v1::ADAMW_8BIT, 2 * adam8_moment + adam8_maps}}) {
    spec.mutable_training()->mutable_optimizer()->set_kind(c.kind);
    const MemoryEstimate e = MustEstimate(spec);
    EXPECT_EQ(e.anatomy().weights_bytes(), 4 * p);
    EXPECT_EQ(e.anatomy().gradients_bytes(), 4 * p);
    EXPECT_EQ(e.anatomy().optimizer_state_bytes(), c.state) << c.kind;
    EXPECT_EQ(e.anatomy().cuda_context_bytes(), 0);
    EXPECT_EQ(e.anatomy().peak_reserved_bytes(), e.anatomy().peak_allocated_bytes());
  }
}

TEST(EstimatorTest, CudaRoundsEveryTensorTo512Bytes) {
  // tiny in bf16: 2 x 2 x 6 small tensors (q/k/v biases, norms: 64, 32, 32, 64, 64 elements...)
  // each rounded up to 512 bytes.
  ExperimentSpec spec = Spec("tiny");
  const MemoryEstimate cuda = MustEstimate(spec);
  spec.set_device(vramlab::v1::CPU);
  const MemoryEstimate cpu = MustEstimate(spec);
  EXPECT_EQ(cpu.anatomy().weights_bytes(), 2 * 125504);
  // Per layer: q bias 128 B, k/v bias 64 B each, two norms 128 B each -> 5 x 512; final norm.
  const int64_t rounded_small = (2 * 5 + 1) * 512;
  const int64_t small_exact = 2 * (128 + 64 + 64 + 128 + 128) + 128;
  EXPECT_EQ(cuda.anatomy().weights_bytes(), 2 * 125504 - small_exact + rounded_small);
}

TEST(EstimatorTest, OffloadAndInBackwardChangeStateAndGradients) {
  ExperimentSpec spec = Spec("qwen2.5-1.5b");
  spec.mutable_training()->mutable_optimizer()->set_offload_to_cpu(true);
  EXPECT_EQ(MustEstimate(spec).anatomy().optimizer_state_bytes(), 0);

  spec = Spec("qwen2.5-1.5b");
  spec.mutable_training()->mutable_optimizer()->set_in_backward(true);
  const MemoryEstimate in_backward = MustEstimate(spec);
  // Each gradient is freed by its update: none is held after backward (what the worker measures),
  // and no optimizer-step phase holds all of them.
  EXPECT_EQ(in_backward.anatomy().gradients_bytes(), 0);
  EXPECT_EQ(in_backward.anatomy().temporary_buffers_bytes(), 0);
  EXPECT_NE(in_backward.peak_phase(), vramlab::v1::OPTIMIZER_STEP);
  const MemoryEstimate plain = MustEstimate(Spec("qwen2.5-1.5b"));
  // Still at least the embedding's gradient (it waits for both tied contributions) in the peak.
  EXPECT_LT(in_backward.predicted_peak_bytes(), plain.predicted_peak_bytes());
  EXPECT_GE(in_backward.predicted_peak_bytes(),
            plain.anatomy().weights_bytes() + int64_t{151936} * 1536 * 2);
}

ExperimentSpec WithAdapter(ExperimentSpec spec, vramlab::v1::AdapterKind kind, int rank) {
  spec.mutable_training()->mutable_adapter()->set_kind(kind);
  spec.mutable_training()->mutable_adapter()->set_rank(rank);
  spec.mutable_training()->set_checkpoint_every_k_layers(1);
  spec.mutable_training()->set_attention(vramlab::v1::SDPA);
  return spec;
}

TEST(EstimatorTest, LoraHoldsGradientsAndStateForTheAdaptersOnly) {
  // PEFT's print_trainable_parameters() for Qwen2.5-1.5B, r=16, all seven targets: 18,464,768.
  const int64_t adapter = 18464768;
  const int64_t p = 1543714304;
  const MemoryEstimate e =
      MustEstimate(WithAdapter(Spec("qwen2.5-1.5b", 2048), vramlab::v1::LORA, 16));
  // Every adapter tensor is a multiple of 512 bytes in fp32.
  EXPECT_EQ(e.anatomy().weights_bytes(), 2 * p);  // frozen, bf16
  EXPECT_EQ(e.anatomy().adapter_weights_bytes(), 4 * adapter);
  EXPECT_EQ(e.anatomy().quantization_constants_bytes(), 0);
  EXPECT_EQ(e.anatomy().gradients_bytes(), 4 * adapter);
  EXPECT_EQ(e.anatomy().optimizer_state_bytes(), 8 * adapter);  // fp32 moments
  const MemoryEstimate full = MustEstimate([] {
    ExperimentSpec s = Spec("qwen2.5-1.5b", 2048);
    s.mutable_training()->set_checkpoint_every_k_layers(1);
    s.mutable_training()->set_attention(vramlab::v1::SDPA);
    return s;
  }());
  // What LoRA buys: bf16 gradients (2 B/param) and AdamW moments (4 B/param) of the whole model
  // give way to the fp32 adapters, their fp32 gradients and moments (16 B/adapter parameter).
  const auto held = [](const MemoryEstimate& m) {
    const auto& a = m.anatomy();
    return a.weights_bytes() + a.adapter_weights_bytes() + a.gradients_bytes() +
           a.optimizer_state_bytes();
  };
  EXPECT_EQ(held(full) - held(e), 6 * p - 16 * adapter);
  EXPECT_LT(e.predicted_peak_bytes(), full.predicted_peak_bytes());
  // What it does not buy: the activations stay (the anatomy's activations of full fine-tuning
  // exclude the gradients being created; LoRA's have none to exclude).
  EXPECT_GE(e.anatomy().activations_bytes(), full.anatomy().activations_bytes());

  ExperimentSpec eight_bit = WithAdapter(Spec("qwen2.5-1.5b", 2048), vramlab::v1::LORA, 16);
  eight_bit.mutable_training()->mutable_optimizer()->set_kind(vramlab::v1::ADAMW_8BIT);
  EXPECT_LT(MustEstimate(eight_bit).anatomy().optimizer_state_bytes(), 3 * adapter);
  ExperimentSpec offload = WithAdapter(Spec("qwen2.5-1.5b", 2048), vramlab::v1::LORA, 16);
  offload.mutable_training()->mutable_optimizer()->set_offload_to_cpu(true);
  EXPECT_EQ(MustEstimate(offload).anatomy().optimizer_state_bytes(), 0);
}

TEST(EstimatorTest, QloraStoresTheProjectionsInNf4) {
  // Qwen2.5-7B, r=16, all seven targets: 40,370,176 trainable (PEFT). Per layer the seven
  // projections take ceil(n/2) code bytes and ceil(n/64) + 4 ceil(n/64/256) constant bytes
  // (each rounded to 512 on CUDA); embeddings, lm_head, biases and norms stay bf16.
  const int64_t adapter = 40370176;
  ExperimentSpec spec = WithAdapter(Spec("qwen2.5-7b", 2048), vramlab::v1::QLORA, 16);
  spec.mutable_memory()->set_device_memory_limit_bytes(int64_t{24} << 30);
  const MemoryEstimate e = MustEstimate(spec);
  EXPECT_EQ(e.anatomy().weights_bytes(), int64_t{3262644224} + 2180656128);
  // Plus the shared tables: bf16 codebook pairs (1024 bytes), the absmax map (1024 + 1020,
  // rounded).
  EXPECT_EQ(e.anatomy().quantization_constants_bytes(), 103606272 + 3 * 1024);
  EXPECT_EQ(e.anatomy().adapter_weights_bytes(), 4 * adapter);
  EXPECT_EQ(e.anatomy().gradients_bytes(), 4 * adapter);
  EXPECT_EQ(e.anatomy().optimizer_state_bytes(), 8 * adapter);
  // The target: 7B QLoRA at seq 2048 fits a 24 GiB card, and the searches answer.
  EXPECT_TRUE(e.fits());
  EXPECT_GT(e.max_seq_len_that_fits(), 2048);
  EXPECT_GE(e.max_micro_batch_that_fits(), 1);
  // LoRA on the same model keeps every weight in bf16 (15.2 GB).
  ExperimentSpec lora = spec;
  lora.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
  const MemoryEstimate l = MustEstimate(lora);
  EXPECT_EQ(l.anatomy().weights_bytes(), 2 * int64_t{7615616512});
  EXPECT_LT(l.max_seq_len_that_fits(), e.max_seq_len_that_fits());
}

// Every configuration the lab runs, for the monotonicity sweep.
std::vector<ExperimentSpec> Variants(const std::string& preset) {
  std::vector<ExperimentSpec> specs;
  for (auto attention : {vramlab::v1::EAGER, vramlab::v1::SDPA}) {
    for (int ckpt : {0, 1, 3}) {
      for (auto loss : {vramlab::v1::FULL, vramlab::v1::CHUNKED}) {
        for (auto opt : {vramlab::v1::ADAMW, vramlab::v1::ADAMW_FP32_MASTER,
                         vramlab::v1::ADAMW_8BIT, vramlab::v1::SGD}) {
          // accum 0 stands for optimizer-in-backward (which needs accumulation 1).
          for (int accum : {0, 1, 4}) {
            ExperimentSpec s = Spec(preset);
            s.mutable_training()->set_attention(attention);
            s.mutable_training()->set_checkpoint_every_k_layers(ckpt);
            s.mutable_training()->set_loss(loss);
            s.mutable_training()->set_loss_chunk_tokens(256);
            s.mutable_training()->mutable_optimizer()->set_kind(opt);
            s.mutable_training()->set_grad_accum_steps(accum == 0 ? 1 : accum);
            s.mutable_training()->mutable_optimizer()->set_in_backward(accum == 0);
            s.mutable_training()->set_steps(2);
            specs.push_back(s);
            if (opt == vramlab::v1::ADAMW || opt == vramlab::v1::ADAMW_8BIT) {
              for (auto adapter : {vramlab::v1::LORA, vramlab::v1::QLORA}) {
                s.mutable_training()->mutable_adapter()->set_kind(adapter);
                specs.push_back(s);
              }
            }
          }
        }
      }
    }
  }
  return specs;
}

// Every stride-th of the variants. A stride prime to each dimension's size (2, 3, 2, 4, 3 and the
// adapters) still visits every value of every dimension, in changing company: the checks that run
// a search per spec stay quick without losing a kind of spec.
std::vector<ExperimentSpec> EveryNth(const std::vector<ExperimentSpec>& all, size_t stride) {
  std::vector<ExperimentSpec> some;
  for (size_t i = 0; i < all.size(); i += stride) some.push_back(all[i]);
  return some;
}

void ExpectNotSmaller(const MemoryEstimate& larger, const MemoryEstimate& smaller,
                      const std::string& what) {
  const auto& a = larger.anatomy();
  const auto& b = smaller.anatomy();
  EXPECT_GE(larger.predicted_peak_bytes(), smaller.predicted_peak_bytes()) << what;
  EXPECT_GE(a.peak_reserved_bytes(), b.peak_reserved_bytes()) << what;
  EXPECT_GE(a.activations_bytes(), b.activations_bytes()) << what;
  EXPECT_EQ(a.weights_bytes(), b.weights_bytes()) << what;
  EXPECT_EQ(a.optimizer_state_bytes(), b.optimizer_state_bytes()) << what;
}

TEST(EstimatorTest, MonotonicInSequenceLength) {
  for (const ExperimentSpec& base : Variants("qwen2.5-1.5b")) {
    ExperimentSpec spec = base;
    MemoryEstimate previous;
    // From the smallest sequence the rules accept (spec_rules::kSeqLen).
    for (int seq = 2; seq <= 40000; seq = seq * 3 / 2 + 1) {
      spec.mutable_training()->set_seq_len(seq);
      const MemoryEstimate e = MustEstimate(spec);
      if (seq > 2)
        ExpectNotSmaller(e, previous, base.ShortDebugString() + " seq " + std::to_string(seq));
      previous = e;
    }
  }
}

TEST(EstimatorTest, MonotonicInMicroBatch) {
  for (const ExperimentSpec& base : Variants("qwen2.5-0.5b")) {
    ExperimentSpec spec = base;
    spec.mutable_training()->set_seq_len(700);
    MemoryEstimate previous;
    // Every size up to 8, then half-steps to 64.
    for (int batch = 1; batch <= 64; batch = batch < 8 ? batch + 1 : batch * 3 / 2) {
      spec.mutable_training()->set_micro_batch_size(batch);
      const MemoryEstimate e = MustEstimate(spec);
      if (batch > 1)
        ExpectNotSmaller(e, previous, base.ShortDebugString() + " batch " + std::to_string(batch));
      previous = e;
    }
  }
}

TEST(EstimatorTest, MaxSeqLenAndBatchAgreeWithFits) {
  for (ExperimentSpec spec : EveryNth(Variants("qwen2.5-1.5b"), 7)) {
    spec.mutable_memory()->set_device_memory_limit_bytes(24 * kGiB);
    const MemoryEstimate e = MustEstimate(spec);
    const int max_seq = e.max_seq_len_that_fits();
    const int max_batch = e.max_micro_batch_that_fits();
    ExperimentSpec probe = spec;
    if (max_seq > 0) {
      probe.mutable_training()->set_seq_len(max_seq);
      EXPECT_TRUE(MustEstimate(probe).fits()) << spec.ShortDebugString();
    }
    // The next sequence up (at least the rules' smallest, when none fits).
    probe.mutable_training()->set_seq_len(std::max(max_seq + 1, 2));
    EXPECT_FALSE(MustEstimate(probe).fits()) << spec.ShortDebugString();
    probe = spec;
    if (max_batch > 0) {
      probe.mutable_training()->set_micro_batch_size(max_batch);
      EXPECT_TRUE(MustEstimate(probe).fits()) << spec.ShortDebugString();
    }
    probe.mutable_training()->set_micro_batch_size(max_batch + 1);
    EXPECT_FALSE(MustEstimate(probe).fits()) << spec.ShortDebugString();
    // The spec itself fits exactly when its seq_len is within the maximum.
    EXPECT_EQ(e.fits(), 512 <= max_seq) << spec.ShortDebugString();
  }
}

TEST(EstimatorTest, LimitArgumentOverridesSpecAndZeroMeansNoLimit) {
  ExperimentSpec spec = Spec("qwen2.5-1.5b");
  const MemoryEstimate unlimited = MustEstimate(spec);
  EXPECT_TRUE(unlimited.fits());
  EXPECT_EQ(unlimited.limit_bytes(), 0);
  EXPECT_EQ(unlimited.max_seq_len_that_fits(), 0);
  EXPECT_EQ(unlimited.max_micro_batch_that_fits(), 0);

  spec.mutable_memory()->set_device_memory_limit_bytes(1 * kGiB);
  EXPECT_FALSE(MustEstimate(spec).fits());
  const MemoryEstimate overridden = MustEstimate(spec, 80 * kGiB);
  EXPECT_EQ(overridden.limit_bytes(), 80 * kGiB);
  EXPECT_TRUE(overridden.fits());
  EXPECT_FALSE(overridden.notes().empty());
}

// Under the default allocator the replay is run again with each new segment above the earlier
// ones (replay_verdict.h); expandable segments have no placement to differ. QLoRA's fresh runs
// get the listed band under both allocators.
TEST(EstimatorTest, TheDefaultAllocatorIsAlsoReplayedWithSegmentsAbove) {
  ExperimentSpec spec = WithAdapter(Spec("qwen2.5-0.5b", 1024), vramlab::v1::QLORA, 16);
  spec.set_device(vramlab::v1::CUDA);
  const MemoryEstimate native = MustEstimate(spec, 24 * kGiB);
  ASSERT_TRUE(native.has_replay());
  EXPECT_DOUBLE_EQ(native.replay().error_band(), 0.005);
  EXPECT_DOUBLE_EQ(native.replay().error_band_over(), 0.01);
  EXPECT_GT(native.replay().peak_reserved_above_bytes(), 0);
  EXPECT_GE(native.replay().peak_reserved_above_bytes(), native.replay().peak_allocated_bytes());
  spec.mutable_memory()->mutable_allocator()->set_expandable_segments(true);
  const MemoryEstimate expandable = MustEstimate(spec, 24 * kGiB);
  ASSERT_TRUE(expandable.has_replay());
  EXPECT_DOUBLE_EQ(expandable.replay().error_band(), 0.005);
  EXPECT_EQ(expandable.replay().peak_reserved_above_bytes(), 0);
}

// The three-way verdict from the allocator replay (replay_verdict.h): FITS when the replayed
// peak reserved stays below the limit by more than the error band, TIGHT within the band (the
// reason names it and where) or where the replay runs out only without the band's room above the
// limit, DOES_NOT_FIT when it runs out even with that room, naming the failing request.
TEST(EstimatorTest, VerdictIsThreeWayAroundTheReplayedPeakReserved) {
  const ExperimentSpec spec = Spec("qwen2.5-1.5b");
  const MemoryEstimate unlimited = MustEstimate(spec);
  EXPECT_EQ(unlimited.verdict(), vramlab::v1::FIT_VERDICT_UNSPECIFIED);
  ASSERT_TRUE(unlimited.has_replay());
  const int64_t peak = unlimited.replay().peak_reserved_bytes();
  // The band's two sides: below the limit for FITS, above it for DOES_NOT_FIT.
  const double band = unlimited.replay().error_band();
  const double band_over = unlimited.replay().error_band_over();
  ASSERT_GE(peak, unlimited.predicted_peak_bytes());
  ASSERT_GT(band, 0);
  ASSERT_GT(band_over, 0);
  EXPECT_EQ(unlimited.reserved_low_bytes(), peak);

  // The smallest limit whose band lies above the peak: FITS; one byte less: TIGHT.
  auto band_of = [&](int64_t limit) {
    return static_cast<int64_t>(std::ceil(band * static_cast<double>(limit)));
  };
  int64_t roomy = static_cast<int64_t>(static_cast<double>(peak) / (1 - band)) - 4;
  while (peak + band_of(roomy) > roomy) ++roomy;
  EXPECT_EQ(MustEstimate(spec, roomy).verdict(), vramlab::v1::FITS);
  EXPECT_TRUE(MustEstimate(spec, roomy).fits());
  const MemoryEstimate tight = MustEstimate(spec, roomy - 1);
  EXPECT_EQ(tight.verdict(), vramlab::v1::TIGHT);
  EXPECT_FALSE(tight.fits());
  EXPECT_NE(tight.replay().reason().find("% of the limit at the "), std::string::npos)
      << tight.replay().reason();
  auto verdict_note = [](const MemoryEstimate& e) -> std::string {
    for (const std::string& note : e.notes()) {
      if (note.rfind("verdict ", 0) == 0) return note;
    }
    return "";
  };
  EXPECT_EQ(verdict_note(tight).rfind("verdict TIGHT: peak reserved ", 0), 0u)
      << verdict_note(tight);
  // Half the allocated peak: out of memory whatever the cache does, with the request named.
  const MemoryEstimate out = MustEstimate(spec, unlimited.predicted_peak_bytes() / 2);
  EXPECT_EQ(out.verdict(), vramlab::v1::DOES_NOT_FIT);
  EXPECT_TRUE(out.replay().oom());
  EXPECT_GT(out.replay().oom_requested_bytes(), 0);
  EXPECT_LE(out.replay().oom_reserved_bytes(), unlimited.predicted_peak_bytes() / 2);
  // The largest limit the replay runs out under (to 16 MiB): the run may still fit there, the
  // replay having come up to the band above runs that fit, so TIGHT, naming the request; a limit
  // whose band stays below it: DOES_NOT_FIT.
  int64_t fails = unlimited.predicted_peak_bytes() / 2, fits = roomy;
  while (fits - fails > (int64_t{16} << 20)) {
    const int64_t mid = fails + (fits - fails) / 2;
    (MustEstimate(spec, mid).replay().oom() ? fails : fits) = mid;
  }
  const MemoryEstimate edge = MustEstimate(spec, fails);
  ASSERT_TRUE(edge.replay().oom());
  EXPECT_EQ(edge.verdict(), vramlab::v1::TIGHT) << edge.replay().reason();
  EXPECT_NE(edge.replay().reason().find("% above the limit"), std::string::npos)
      << edge.replay().reason();
  const auto ruled_out = static_cast<int64_t>(static_cast<double>(fails) / (1 + band_over)) - 1;
  EXPECT_EQ(MustEstimate(spec, ruled_out).verdict(), vramlab::v1::DOES_NOT_FIT);
  EXPECT_EQ(verdict_note(unlimited), "");
  bool replay_note = false;
  for (const std::string& note : unlimited.notes()) {
    replay_note = replay_note || note.rfind("reserved by replaying", 0) == 0;
  }
  EXPECT_TRUE(replay_note);
}

TEST(EstimatorTest, PeakIsTheLargestPhaseAndAtLeastTheStaticState) {
  for (const ExperimentSpec& spec : Variants("qwen2.5-1.5b")) {
    const MemoryEstimate e = MustEstimate(spec);
    const auto& a = e.anatomy();
    EXPECT_GE(e.predicted_peak_bytes(),
              a.weights_bytes() + a.gradients_bytes() + a.optimizer_state_bytes());
    EXPECT_EQ(a.peak_allocated_bytes(), e.predicted_peak_bytes());
    EXPECT_GE(a.peak_reserved_bytes(), a.peak_allocated_bytes());
    EXPECT_EQ(a.peak_device_used_bytes(), a.peak_reserved_bytes() + a.cuda_context_bytes());
    EXPECT_NE(e.peak_phase(), vramlab::v1::PHASE_UNSPECIFIED);
  }
}

TEST(EstimatorTest, BadSpecsAreInvalidArgumentNamingTheField) {
  struct Case {
    std::string field;
    ExperimentSpec spec;
  };
  std::vector<Case> cases;
  cases.push_back({"model.preset", Spec("qwen9-huge")});
  cases.push_back({"model.preset", Spec("")});
  ExperimentSpec s = Spec("tiny", -1);
  cases.push_back({"training.seq_len", s});
  s = Spec("tiny", 16, -2);
  cases.push_back({"training.micro_batch_size", s});
  s = Spec("tiny");
  s.mutable_training()->set_grad_accum_steps(4);
  s.mutable_training()->mutable_optimizer()->set_in_backward(true);
  cases.push_back({"training.optimizer.in_backward", s});
  s = Spec("");
  s.mutable_model()->mutable_config()->set_hidden_size(100);
  s.mutable_model()->mutable_config()->set_vocab_size(10);
  s.mutable_model()->mutable_config()->set_intermediate_size(10);
  s.mutable_model()->mutable_config()->set_num_hidden_layers(1);
  s.mutable_model()->mutable_config()->set_num_attention_heads(3);
  cases.push_back({"model.config.hidden_size", s});
  s.mutable_model()->mutable_config()->set_num_attention_heads(0);
  cases.push_back({"model.config.num_attention_heads", s});
  s = Spec("tiny");
  s.mutable_training()->set_checkpoint_every_k_layers(-1);
  cases.push_back({"training.checkpoint_every_k_layers", s});
  s = Spec("tiny");
  s.mutable_memory()->set_device_memory_limit_bytes(-5);
  cases.push_back({"memory.device_memory_limit_bytes", s});
  for (const Case& c : cases) {
    absl::StatusOr<MemoryEstimate> e = EstimateMemory(c.spec, 0);
    ASSERT_FALSE(e.ok()) << c.field;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(e.status().message().find(c.field), std::string::npos) << e.status();
  }
  EXPECT_EQ(EstimateMemory(Spec("tiny"), -1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vramlab::server
