#include "server/spec/validate_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

ExperimentSpec Tiny() {
  ExperimentSpec spec;
  spec.mutable_model()->set_preset("tiny");
  spec.mutable_training()->set_seq_len(64);
  return spec;
}

// Applies `mutate` to a valid spec and returns the validation message ("" when OK).
std::string ErrorAfter(const std::function<void(ExperimentSpec&)>& mutate,
                       SpecLimits limits = SpecLimits()) {
  ExperimentSpec spec = Tiny();
  mutate(spec);
  absl::Status status = ValidateSpec(spec, limits);
  if (!status.ok()) EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST(ValidateSpecTest, AcceptsMinimalAndDefaultedSpecs) {
  EXPECT_EQ(ErrorAfter([](ExperimentSpec&) {}), "");
  EXPECT_EQ(ErrorAfter([](ExperimentSpec& s) { s.mutable_training()->clear_seq_len(); }), "");
  EXPECT_EQ(ErrorAfter([](ExperimentSpec& s) { s.mutable_model()->set_preset("qwen2.5-1.5b"); }),
            "");
}

TEST(ValidateSpecTest, NamesFieldPathAndReason) {
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_training()->set_seq_len(200000); }),
              HasSubstr("spec.training.seq_len: must be between 2 and 131072, got 200000"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_training()->set_steps(-1); }),
              HasSubstr("spec.training.steps"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_model()->set_preset("gpt-5"); }),
              HasSubstr("spec.model.preset: unknown preset \"gpt-5\""));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_model()->clear_preset(); }),
              HasSubstr("spec.model.preset: one of preset, config or weights_dir"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_training()->set_dtype(static_cast<vramlab::v1::DType>(99));
              }),
              HasSubstr("spec.training.dtype: unknown enum value 99"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_training()->mutable_optimizer()->set_learning_rate(std::nan(""));
              }),
              HasSubstr("spec.training.optimizer.learning_rate"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_training()->set_grad_accum_steps(4);
                s.mutable_training()->mutable_optimizer()->set_in_backward(true);
              }),
              HasSubstr("spec.training.optimizer.in_backward: an in-backward update consumes each "
                        "gradient at once"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_model()->set_weights_dir("rel/dir"); }),
              HasSubstr("spec.model.weights_dir: must be an absolute path"));
}

TEST(ValidateSpecTest, ChecksExplicitModelConfigConsistency) {
  auto config = [](ExperimentSpec& s) {
    auto* c = s.mutable_model()->mutable_config();
    c->set_vocab_size(1000);
    c->set_hidden_size(64);
    c->set_intermediate_size(128);
    c->set_num_hidden_layers(2);
    c->set_num_attention_heads(4);
    c->set_num_key_value_heads(2);
  };
  EXPECT_EQ(ErrorAfter(config), "");
  EXPECT_THAT(
      ErrorAfter([&](ExperimentSpec& s) {
        config(s);
        s.mutable_model()->mutable_config()->set_hidden_size(66);
      }),
      HasSubstr(
          "spec.model.config.hidden_size: (66) must be a multiple of num_attention_heads (4)"));
  EXPECT_THAT(
      ErrorAfter([&](ExperimentSpec& s) {
        config(s);
        s.mutable_model()->mutable_config()->set_num_key_value_heads(3);
      }),
      HasSubstr("spec.model.config.num_key_value_heads: (3) must divide num_attention_heads (4)"));
}

// The family rules of common/spec/model_family.h, at submit, each naming its field.
TEST(ValidateSpecTest, ChecksTheModelFamilyRules) {
  auto config = [](ExperimentSpec& s, const char* model_type) {
    auto* c = s.mutable_model()->mutable_config();
    c->set_model_type(model_type);
    c->set_vocab_size(1000);
    c->set_hidden_size(64);
    c->set_intermediate_size(128);
    c->set_num_hidden_layers(2);
    c->set_num_attention_heads(4);
    c->set_num_key_value_heads(2);
  };
  for (const char* family : {"qwen2", "llama", "mistral", "qwen3"}) {
    EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) { config(s, family); }), "") << family;
  }
  EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) { config(s, "gemma"); }),
            "spec.model.config.model_type: unsupported model_type \"gemma\"; supported: qwen2, "
            "llama, mistral, "
            "qwen3");
  EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) {
              config(s, "llama");
              s.mutable_model()->mutable_config()->mutable_rope_scaling()->set_rope_type("yarn");
            }),
            "spec.model.config.rope_scaling.rope_type: unsupported rope_type \"yarn\"; supported: "
            "default, llama3");
  EXPECT_THAT(
      ErrorAfter([&](ExperimentSpec& s) {
        config(s, "llama");
        s.mutable_model()->mutable_config()->mutable_rope_scaling()->set_rope_type("llama3");
      }),
      HasSubstr("spec.model.config.rope_scaling.factor: must be at least 1"));
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                config(s, "mistral");
                s.mutable_model()->mutable_config()->set_attention_bias(true);
              }),
              HasSubstr("spec.model.config.attention_bias: mistral's projections have no bias"));
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                config(s, "qwen3");
                s.mutable_model()->mutable_config()->set_head_dim(15);
              }),
              HasSubstr("spec.model.config.head_dim: must be even"));
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                config(s, "llama");
                s.mutable_model()->mutable_config()->set_sliding_window(8);
              }),
              HasSubstr("spec.model.config.sliding_window: llama has no sliding window attention"));
  EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) {
              config(s, "qwen3");
              s.mutable_model()->mutable_config()->set_head_dim(32);
              s.mutable_model()->mutable_config()->set_use_sliding_window(true);
              s.mutable_model()->mutable_config()->set_sliding_window(8);
              s.mutable_model()->mutable_config()->set_max_window_layers(1);
            }),
            "");
}

TEST(ValidateSpecTest, AdapterFieldsNameTheField) {
  const auto lora = [](ExperimentSpec& s) {
    s.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::LORA);
  };
  EXPECT_EQ(ErrorAfter(lora), "");
  EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) {
              lora(s);
              s.mutable_training()->mutable_adapter()->set_rank(32);  // tiny: k/v are 64 -> 32
              s.mutable_training()->mutable_adapter()->set_dropout(0.05);
            }),
            "");
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                lora(s);
                s.mutable_training()->mutable_adapter()->set_rank(-1);
              }),
              HasSubstr("spec.training.adapter.rank: must be between 1 and 65536, got -1"));
  EXPECT_THAT(
      ErrorAfter([&](ExperimentSpec& s) {
        lora(s);
        s.mutable_training()->mutable_adapter()->set_rank(33);
      }),
      HasSubstr(
          "spec.training.adapter.rank: must be at most 32 (min(in_features, out_features) of a "
          "wrapped layer), got 33"));
  // Without k and v, 64 is allowed.
  EXPECT_EQ(ErrorAfter([&](ExperimentSpec& s) {
              lora(s);
              s.mutable_training()->mutable_adapter()->set_rank(64);
              s.mutable_training()->mutable_adapter()->add_target_modules(vramlab::v1::Q_PROJ);
              s.mutable_training()->mutable_adapter()->add_target_modules(vramlab::v1::O_PROJ);
            }),
            "");
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                lora(s);
                s.mutable_training()->mutable_adapter()->add_target_modules(vramlab::v1::Q_PROJ);
                s.mutable_training()->mutable_adapter()->add_target_modules(
                    static_cast<vramlab::v1::AdapterTarget>(9));
              }),
              HasSubstr("spec.training.adapter.target_modules[1]: unknown target"));
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                lora(s);
                s.mutable_training()->mutable_adapter()->set_alpha(-2);
              }),
              HasSubstr("spec.training.adapter.alpha: must be a number in (0, 1e+06], got -2"));
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                lora(s);
                s.mutable_training()->mutable_adapter()->set_dropout(1);
              }),
              HasSubstr("spec.training.adapter.dropout: must be a number in [0, 1), got 1"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::QLORA);
                s.mutable_training()->set_dtype(vramlab::v1::FLOAT32);
              }),
              HasSubstr("spec.training.dtype: QLoRA computes in bfloat16 or float16"));
  EXPECT_EQ(ErrorAfter([](ExperimentSpec& s) {
              s.mutable_training()->mutable_adapter()->set_kind(vramlab::v1::QLORA);
              s.mutable_model()->set_preset("qwen2.5-7b");
              s.mutable_training()->mutable_adapter()->set_rank(64);
            }),
            "");
}

TEST(ValidateSpecTest, MemoryFieldsAreCheckedAndSnapshotPathIsReserved) {
  EXPECT_THAT(
      ErrorAfter([](ExperimentSpec& s) { s.mutable_memory()->set_snapshot_path("/etc/passwd"); }),
      HasSubstr("spec.memory.snapshot_path: is set by the daemon"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_memory()->mutable_allocator()->set_garbage_collection_threshold(1.5);
              }),
              HasSubstr("spec.memory.allocator.garbage_collection_threshold"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_memory()->mutable_allocator()->set_max_split_size_mb(20);
              }),
              HasSubstr("spec.memory.allocator.max_split_size_mb"));
  // Goes into an environment variable: no shell or separator characters.
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_memory()->mutable_allocator()->set_extra("a:1;rm -rf /");
              }),
              HasSubstr("spec.memory.allocator.extra: character ';' is not allowed"));
}

TEST(ValidateSpecTest, SweepLimits) {
  SpecLimits limits;
  limits.max_sweep_points = 3;
  EXPECT_THAT(ErrorAfter(
                  [](ExperimentSpec& s) {
                    for (int v : {128, 256, 512, 1024}) s.mutable_sweep()->add_values(v);
                    s.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
                  },
                  limits),
              HasSubstr("spec.sweep.values: must be between 0 and 3, got 4"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.mutable_sweep()->add_values(128); }),
              HasSubstr("spec.sweep.variable: required"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
                s.mutable_sweep()->add_values(0);
              }),
              HasSubstr("spec.sweep.values[0]"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_sweep()->set_variable(vramlab::v1::MICRO_BATCH_SIZE);
                s.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
                s.mutable_sweep()->set_search_min(8);
                s.mutable_sweep()->set_search_max(4);
              }),
              HasSubstr("spec.sweep.search_max"));
}

TEST(ValidateSpecTest, FaultNeedsTheFlagAndDeviceMustMatchTheDaemon) {
  auto fault = [](ExperimentSpec& s) { s.set_fault(vramlab::v1::SEGFAULT); };
  EXPECT_THAT(ErrorAfter(fault), HasSubstr("spec.fault: fault injection is disabled"));
  SpecLimits allow;
  allow.allow_fault_injection = true;
  EXPECT_EQ(ErrorAfter(fault, allow), "");
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.set_device(vramlab::v1::CUDA); }),
              HasSubstr("spec.device: this daemon runs on CPU"));
}

TEST(ValidateSpecTest, FusedKernelsNeedACudaDaemon) {
  auto fused = [](ExperimentSpec& s) { s.mutable_training()->set_kernels(vramlab::v1::FUSED); };
  EXPECT_THAT(ErrorAfter(fused), HasSubstr("spec.training.kernels: FUSED runs CUDA kernels"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) {
                s.mutable_training()->set_kernels(static_cast<vramlab::v1::KernelsImpl>(7));
              }),
              HasSubstr("spec.training.kernels"));
  SpecLimits cuda;
  cuda.device = vramlab::v1::CUDA;
  EXPECT_EQ(ErrorAfter(fused, cuda), "");
  EXPECT_EQ(
      ErrorAfter([](ExperimentSpec& s) { s.mutable_training()->set_kernels(vramlab::v1::ATEN); }),
      "");
}

TEST(ValidateSpecTest, SpecSizeAndNameLimits) {
  SpecLimits limits;
  limits.max_spec_bytes = 100;
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.set_name(std::string(90, 'x')); }, limits),
              HasSubstr("bytes, at most 100 allowed"));
  EXPECT_THAT(ErrorAfter([](ExperimentSpec& s) { s.set_name("a\nb"); }),
              HasSubstr("spec.name: contains a control character"));
}

}  // namespace
}  // namespace vramlab::server

namespace vramlab::server {
namespace {

TEST(ValidateSpecTest, ParallelWorldSizeShardingAndHostDevices) {
  SpecLimits host;
  host.host_devices = 4;
  auto with = [](int32_t n, vramlab::v1::Sharding sharding) {
    return [=](ExperimentSpec& s) {
      s.mutable_parallel()->set_world_size(n);
      s.mutable_parallel()->set_sharding(sharding);
    };
  };
  EXPECT_EQ(ErrorAfter(with(4, vramlab::v1::SHARD_FULL), host), "");
  EXPECT_EQ(ErrorAfter(with(1, vramlab::v1::SHARD_NONE), host), "");
  EXPECT_EQ(ErrorAfter(with(0, vramlab::v1::SHARDING_UNSPECIFIED), host), "");
  EXPECT_THAT(ErrorAfter(with(65, vramlab::v1::SHARD_NONE)),
              HasSubstr("spec.parallel.world_size: must be between 0 and 64, got 65"));
  EXPECT_THAT(ErrorAfter(with(-2, vramlab::v1::SHARD_NONE)),
              HasSubstr("spec.parallel.world_size: must be between 0 and 64, got -2"));
  EXPECT_THAT(
      ErrorAfter(with(1, vramlab::v1::SHARD_OPTIMIZER)),
      HasSubstr(std::string("spec.parallel.sharding: ") + spec_rules::kShardingNeedsRanksMessage));
  EXPECT_THAT(ErrorAfter(with(0, vramlab::v1::SHARD_FULL)), HasSubstr("spec.parallel.sharding"));
  // As the worker refuses it: only SHARD_FULL gathers parameters to free after forward.
  EXPECT_THAT(ErrorAfter([&](ExperimentSpec& s) {
                with(2, vramlab::v1::SHARD_OPTIMIZER)(s);
                s.mutable_parallel()->set_reshard_after_forward(true);
              }),
              HasSubstr(std::string("spec.parallel.reshard_after_forward: ") +
                        spec_rules::kFullShardingOnlyMessage));
  EXPECT_THAT(ErrorAfter(
                  [&](ExperimentSpec& s) {
                    with(2, vramlab::v1::SHARD_FULL)(s);
                    s.mutable_parallel()->set_reshard_after_forward(true);
                  },
                  host),
              ::testing::IsEmpty());
  // Turning prefetch off likewise: only SHARD_FULL gathers; stating the default is no refusal.
  EXPECT_THAT(
      ErrorAfter([&](ExperimentSpec& s) {
        with(2, vramlab::v1::SHARD_GRADIENTS)(s);
        s.mutable_parallel()->set_prefetch(false);
      }),
      HasSubstr(std::string("spec.parallel.prefetch: ") + spec_rules::kFullShardingOnlyMessage));
  EXPECT_THAT(ErrorAfter(
                  [&](ExperimentSpec& s) {
                    with(2, vramlab::v1::SHARD_GRADIENTS)(s);
                    s.mutable_parallel()->set_prefetch(true);
                  },
                  host),
              ::testing::IsEmpty());
  EXPECT_THAT(ErrorAfter(
                  [&](ExperimentSpec& s) {
                    with(2, vramlab::v1::SHARD_FULL)(s);
                    s.mutable_parallel()->set_prefetch(false);
                  },
                  host),
              ::testing::IsEmpty());
  EXPECT_THAT(ErrorAfter(with(2, static_cast<vramlab::v1::Sharding>(9))),
              HasSubstr("spec.parallel.sharding: unknown enum value 9"));
  // More ranks than the host has devices: a valid spec this host cannot run.
  ExperimentSpec spec = Tiny();
  with(8, vramlab::v1::SHARD_FULL)(spec);
  absl::Status status = ValidateSpec(spec, host);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("spec.parallel.world_size: 8 ranks"));
  EXPECT_THAT(status.message(), HasSubstr("4 CPU worker slot(s)"));
  host.device = vramlab::v1::CUDA;
  EXPECT_THAT(ValidateSpec(spec, host).message(), HasSubstr("this daemon has 4 GPU(s)"));
  // host_devices 0 (an estimate) does not check it.
  EXPECT_TRUE(ValidateSpec(spec, SpecLimits()).ok());
}

// The delayed update is the offloaded host step one step late: without offload, with an
// in-backward update or over several ranks it is refused naming the field, in common/spec's words.
TEST(ValidateSpecTest, DelayedUpdateNeedsOffloadOneProcessAndNoInBackward) {
  SpecLimits host;
  host.host_devices = 4;
  auto delayed = [](bool offload, bool in_backward, int32_t world_size) {
    return [=](ExperimentSpec& s) {
      auto* o = s.mutable_training()->mutable_optimizer();
      o->set_delayed_update(true);
      o->set_offload_to_cpu(offload);
      o->set_in_backward(in_backward);
      s.mutable_parallel()->set_world_size(world_size);
    };
  };
  const std::string field = std::string("spec.") + spec_rules::kDelayedUpdateField + ": ";
  EXPECT_EQ(ErrorAfter(delayed(true, false, 0), host), "");
  EXPECT_EQ(ErrorAfter(delayed(true, false, 1), host), "");
  EXPECT_EQ(ErrorAfter(delayed(false, false, 0), host),
            field + spec_rules::kDelayedUpdateNeedsOffloadMessage);
  EXPECT_EQ(ErrorAfter(delayed(true, true, 0), host),
            field + spec_rules::kDelayedUpdateWithInBackwardMessage);
  EXPECT_EQ(ErrorAfter(delayed(true, false, 2), host),
            field + spec_rules::kDelayedUpdateParallelMessage);
  // Refused before the host's device count is looked at (INVALID_ARGUMENT, not
  // FAILED_PRECONDITION).
  EXPECT_EQ(ErrorAfter(delayed(true, false, 8), host),
            field + spec_rules::kDelayedUpdateParallelMessage);
  // The same parallel spec without the switch is one this host's devices decide.
  ExperimentSpec spec = Tiny();
  delayed(true, false, 2)(spec);
  spec.mutable_training()->mutable_optimizer()->set_delayed_update(false);
  EXPECT_TRUE(ValidateSpec(spec, host).ok());
}

}  // namespace
}  // namespace vramlab::server
