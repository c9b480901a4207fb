#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "common/spec/device_rules.h"
#include "common/spec/optimizer_rules.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {
namespace {

// The field path of the SpecError that parsing `json` throws; "" if it parses.
std::string ErrorField(const std::string& json) {
  try {
    ParseExperimentSpec(json);
  } catch (const SpecError& e) {
    return e.field().empty() ? "<document>" : e.field();
  }
  return "";
}

TEST(SpecParserTest, AppliesProtoDefaults) {
  const ExperimentSpec spec = ParseExperimentSpec(R"({"model": {"preset": "tiny"}})");
  EXPECT_EQ(spec.model.preset, "tiny");
  EXPECT_EQ(spec.training.micro_batch_size, 1);
  EXPECT_EQ(spec.training.grad_accum_steps, 1);
  EXPECT_EQ(spec.training.seq_len, 512);
  EXPECT_EQ(spec.training.steps, 1);
  EXPECT_EQ(spec.training.dtype, DType::kBfloat16);
  EXPECT_EQ(spec.training.attention, plain::AttentionImpl::kEager);
  EXPECT_EQ(spec.training.loss, plain::LossImpl::kFull);
  EXPECT_EQ(spec.training.loss_chunk_tokens, 1024);
  EXPECT_EQ(spec.training.optimizer.kind, plain::OptimizerKind::kAdamw);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.learning_rate, 1e-5);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.epsilon, 1e-8);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.momentum, 0.9);
  EXPECT_EQ(spec.memory.sample_interval_ms, 10);
  EXPECT_FALSE(SweepActive(spec.sweep));
}

TEST(SpecParserTest, AcceptsCamelCaseSnakeCaseStringsAndEnumNumbers) {
  const ExperimentSpec camel = ParseExperimentSpec(R"({
    "name": "sad path",
    "model": {"preset": "qwen2.5-1.5b", "initSeed": 7},
    "training": {"microBatchSize": 4, "gradAccumSteps": 1, "seqLen": 512, "dtype": "FLOAT32",
                 "optimizer": {"kind": "ADAMW_FP32_MASTER", "learningRate": 0.001, "weightDecay": 0},
                 "attention": "SDPA", "loss": "CHUNKED", "lossChunkTokens": 256,
                 "data": {"seed": 3, "tokenIdBound": 100}},
    "memory": {"deviceMemoryLimitBytes": "25769803776", "sampleIntervalMs": 5,
               "allocator": {"expandableSegments": true}},
    "device": "CPU"})");
  EXPECT_EQ(camel.name, "sad path");
  EXPECT_EQ(camel.model.init_seed, 7u);
  EXPECT_EQ(camel.training.micro_batch_size, 4);
  EXPECT_EQ(camel.training.dtype, DType::kFloat32);
  EXPECT_EQ(camel.training.optimizer.kind, plain::OptimizerKind::kAdamwFp32Master);
  EXPECT_DOUBLE_EQ(camel.training.optimizer.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(camel.training.optimizer.weight_decay, 0.0)
      << "an explicit 0 must not become the default";
  EXPECT_EQ(camel.training.attention, plain::AttentionImpl::kSdpa);
  EXPECT_EQ(camel.training.loss, plain::LossImpl::kChunked);
  EXPECT_EQ(camel.training.loss_chunk_tokens, 256);
  EXPECT_EQ(camel.training.data.token_id_bound, 100);
  EXPECT_EQ(camel.memory.device_memory_limit_bytes, 25769803776LL);
  EXPECT_TRUE(camel.memory.allocator.expandable_segments);
  EXPECT_EQ(camel.device, DeviceKind::kCpu);

  const ExperimentSpec snake = ParseExperimentSpec(R"({
    "model": {"preset": "tiny", "init_seed": 7},
    "training": {"micro_batch_size": "4", "dtype": 2, "optimizer": {"kind": 3}},
    "memory": {"device_memory_limit_bytes": 1000000, "sample_interval_ms": 1e1}})");
  EXPECT_EQ(snake.model.init_seed, 7u);
  EXPECT_EQ(snake.training.micro_batch_size, 4);
  EXPECT_EQ(snake.training.dtype, DType::kFloat32);
  EXPECT_EQ(snake.training.optimizer.kind, plain::OptimizerKind::kSgd);
  EXPECT_EQ(snake.memory.device_memory_limit_bytes, 1000000);
  EXPECT_EQ(snake.memory.sample_interval_ms, 10);
}

TEST(SpecParserTest, NullMeansDefault) {
  const ExperimentSpec spec = ParseExperimentSpec(R"({"model": {"preset": "tiny"}, "training": null,
                                                      "memory": {"sampleIntervalMs": null}})");
  EXPECT_EQ(spec.training.seq_len, 512);
  EXPECT_EQ(spec.memory.sample_interval_ms, 10);
}

TEST(SpecParserTest, ReadsExplicitConfigAndSweeps) {
  const ExperimentSpec spec = ParseExperimentSpec(R"({
    "model": {"config": {"vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176, "numHiddenLayers": 2,
                         "numAttentionHeads": 4, "numKeyValueHeads": 2, "tieWordEmbeddings": true}},
    "sweep": {"variable": "SEQ_LEN", "values": [16, 32, "64"]}})");
  EXPECT_NE(spec.model.config, ModelConfig{});
  EXPECT_EQ(spec.model.config.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(spec.model.config.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(spec.model.config.initializer_range, 0.02);
  EXPECT_TRUE(SweepActive(spec.sweep));
  EXPECT_EQ(spec.sweep.mode, SweepMode::kList);
  EXPECT_EQ(spec.sweep.values, (std::vector<int32_t>{16, 32, 64}));

  const ExperimentSpec search = ParseExperimentSpec(R"({"model": {"preset": "tiny"},
    "sweep": {"variable": "MICRO_BATCH_SIZE", "mode": "SEARCH_MAX", "searchMin": 1, "searchMax": 64}})");
  EXPECT_TRUE(SweepActive(search.sweep));
  EXPECT_EQ(search.sweep.search_granularity, 1);
}

// The family fields of model.config (proto ModelConfig), in both name forms, and the family
// rules of common/spec/model_family.h naming the field.
TEST(SpecParserTest, ReadsModelFamilyFieldsAndAppliesTheFamilyRules) {
  const ExperimentSpec spec = ParseExperimentSpec(R"({
    "model": {"config": {"modelType": "llama", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
                         "numHiddenLayers": 2, "numAttentionHeads": 4, "head_dim": 24, "attentionBias": true,
                         "mlp_bias": false,
                         "ropeScaling": {"ropeType": "llama3", "factor": 8, "lowFreqFactor": 1,
                                         "high_freq_factor": 4, "originalMaxPositionEmbeddings": 8192}}}})");
  const ModelConfig& c = spec.model.config;
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 24);
  EXPECT_TRUE(c.has_attention_bias && c.attention_bias);
  EXPECT_TRUE(c.has_mlp_bias && !c.mlp_bias);
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  const ExperimentSpec qwen3 = ParseExperimentSpec(R"({
    "model": {"config": {"modelType": "qwen3", "vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
                         "numHiddenLayers": 2, "numAttentionHeads": 4, "useSlidingWindow": true,
                         "slidingWindow": 8, "maxWindowLayers": 0}}})");
  EXPECT_TRUE(qwen3.model.config.has_max_window_layers);
  EXPECT_EQ(qwen3.model.config.max_window_layers, 0);
  EXPECT_EQ(qwen3.model.config.sliding_window, 8);

  const std::string shapes = R"("vocabSize": 512, "hiddenSize": 64, "intermediateSize": 176,
                                "numHiddenLayers": 2, "numAttentionHeads": 4)";
  EXPECT_EQ(ErrorField(R"({"model": {"config": {"modelType": "phi3", )" + shapes + "}}}"),
            "model.config.model_type");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"config": {"modelType": "llama", "ropeScaling": {"ropeType": "yarn"}, )" +
          shapes + "}}}"),
      "model.config.rope_scaling.rope_type");
  EXPECT_EQ(ErrorField(R"({"model": {"config": {"ropeScaling": {"rope": 1}, )" + shapes + "}}}"),
            "model.config.rope_scaling.rope");
  EXPECT_EQ(ErrorField(R"({"model": {"config": {"modelType": "mistral", "mlpBias": true, )" +
                       shapes + "}}}"),
            "model.config.mlp_bias");
  EXPECT_EQ(ErrorField(R"({"model": {"config": {"numKeyValueHeads": 3, )" + shapes + "}}}"),
            "model.config.num_key_value_heads");
}

TEST(SpecParserTest, RejectsMalformedDocuments) {
  EXPECT_EQ(ErrorField("not json"), "<document>");
  EXPECT_EQ(ErrorField("[1, 2]"), "<document>");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}} trailing)"), "<document>");
}

TEST(SpecParserTest, RejectsUnknownFieldsWithTheirPath) {
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "bogus": 1})"), "bogus");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLength": 1}})"),
            "training.seqLength");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"optimizer": {"lr": 1}}})"),
            "training.optimizer.lr");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny", "config": {"hidden": 3}}})"),
            "model.config.hidden");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLen": 8, "seq_len": 8}})"),
            "training.seq_len");
}

TEST(SpecParserTest, RejectsWrongTypesAndUnknownEnumValues) {
  EXPECT_EQ(ErrorField(R"({"model": {"preset": 5}})"), "model.preset");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLen": 1.5}})"),
            "training.seq_len");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLen": "12x"}})"),
            "training.seq_len");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLen": 3000000000}})"),
            "training.seq_len");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"dtype": "FLOAT64"}})"),
            "training.dtype");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"dtype": 9}})"),
            "training.dtype");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "memory": {"recordHistory": "yes"}})"),
            "memory.record_history");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny", "initSeed": -1}})"), "model.init_seed");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN", "values": [8, "x"]}})"),
      "sweep.values[1]");
}

TEST(SpecParserTest, RejectsOutOfRangeValues) {
  EXPECT_EQ(ErrorField(R"({})"), "model.preset");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "gpt-5"}})"), "model.preset");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"microBatchSize": -1}})"),
            "training.micro_batch_size");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"seqLen": 1}})"),
            "training.seq_len");
  EXPECT_EQ(
      ErrorField(R"({"model": {"preset": "tiny"}, "training": {"optimizer": {"beta1": 1.0}}})"),
      "training.optimizer.beta1");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "training": {"optimizer": {"learningRate": "NaN"}}})"),
      "training.optimizer.learning_rate");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "training": {"optimizer": {"weightDecay": -0.1}}})"),
      "training.optimizer.weight_decay");
  EXPECT_EQ(
      ErrorField(R"({"model": {"preset": "tiny"}, "memory": {"deviceMemoryLimitBytes": "-5"}})"),
      "memory.device_memory_limit_bytes");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "memory": {"sampleIntervalMs": 100000}})"),
            "memory.sample_interval_ms");
  EXPECT_EQ(ErrorField(
                R"({"model": {"preset": "tiny"}, "memory": {"allocator": {"maxSplitSizeMb": 8}}})"),
            "memory.allocator.max_split_size_mb");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"},
                           "memory": {"allocator": {"garbageCollectionThreshold": 1.5}}})"),
            "memory.allocator.garbage_collection_threshold");
  EXPECT_EQ(
      ErrorField(R"({"model": {"preset": "tiny"}, "memory": {"allocator": {"extra": "a b"}}})"),
      "memory.allocator.extra");
  EXPECT_EQ(
      ErrorField(R"({"model": {"config": {"vocabSize": 8, "hiddenSize": 10, "intermediateSize": 4,
                                                "numHiddenLayers": 1, "numAttentionHeads": 3}}})"),
      "model.config.hidden_size");
}

// training.optimizer.delayed_update: offload only, not with in_backward; read from its JSON name.
TEST(SpecParserTest, DelayedUpdateNeedsOffloadAndNoInBackward) {
  const ExperimentSpec spec = ParseExperimentSpec(
      R"({"model": {"preset": "tiny"}, "training": {"optimizer": {"offloadToCpu": true, "delayedUpdate": true}}})");
  EXPECT_TRUE(spec.training.optimizer.delayed_update);
  EXPECT_FALSE(
      ParseExperimentSpec(R"({"model": {"preset": "tiny"}})").training.optimizer.delayed_update);
  for (const char* optimizer :
       {R"({"delayedUpdate": true})",
        R"({"delayedUpdate": true, "offloadToCpu": true, "inBackward": true})"}) {
    const std::string json =
        std::string(R"({"model": {"preset": "tiny"}, "training": {"optimizer": )") + optimizer +
        "}}";
    try {
      ParseExperimentSpec(json);
      ADD_FAILURE() << "accepted " << json;
    } catch (const SpecError& e) {
      EXPECT_EQ(e.field(), spec_rules::kDelayedUpdateField) << json;
      const std::string expected = std::string(optimizer).find("inBackward") != std::string::npos
                                       ? spec_rules::kDelayedUpdateWithInBackwardMessage
                                       : spec_rules::kDelayedUpdateNeedsOffloadMessage;
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(SpecParserTest, RejectsContradictoryCombinations) {
  try {
    ParseExperimentSpec(R"({"model": {"preset": "tiny"},
                            "training": {"gradAccumSteps": 4, "optimizer": {"inBackward": true}}})");
    FAIL() << "in_backward with accumulation must be rejected";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.optimizer.in_backward");
    EXPECT_NE(std::string(e.what()).find("grad_accum_steps"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "sweep": {"values": [8, 16]}})"),
            "sweep.variable");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN"}})"),
            "sweep.values");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN", "values": [8, 0]}})"),
      "sweep.values[1]");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN", "mode": "SEARCH_MAX",
                                                                  "searchMin": 64, "searchMax": 32}})"),
      "sweep.search_max");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN", "mode": "SEARCH_MAX",
                                                                  "searchMin": 65, "searchMax": 70,
                                                                  "searchGranularity": 64}})"),
      "sweep.search_granularity");
  EXPECT_EQ(
      ErrorField(
          R"({"model": {"preset": "tiny"}, "sweep": {"variable": "SEQ_LEN", "mode": "SEARCH_MAX",
                                                                  "values": [8], "searchMin": 8, "searchMax": 9}})"),
      "sweep.values");
}

TEST(SpecParserTest, KernelsDefaultToAtenAndFusedNeedsCuda) {
  EXPECT_EQ(ParseExperimentSpec(R"({"model": {"preset": "tiny"}})").training.kernels,
            plain::KernelsImpl::kAten);
  const ExperimentSpec fused = ParseExperimentSpec(
      R"({"model": {"preset": "tiny"}, "training": {"kernels": "FUSED"}, "device": "CUDA"})");
  EXPECT_EQ(fused.training.kernels, plain::KernelsImpl::kFused);
  EXPECT_EQ(ParseExperimentSpec(R"({"model": {"preset": "tiny"}, "training": {"kernels": 1}})")
                .training.kernels,
            plain::KernelsImpl::kAten);
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"kernels": "TRITON"}})"),
            "training.kernels");
  try {
    ParseExperimentSpec(
        R"({"model": {"preset": "tiny"}, "training": {"kernels": "FUSED"}, "device": "CPU"})");
    FAIL() << "FUSED on the CPU must be rejected";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.kernels");
    EXPECT_EQ(std::string(e.what()),
              std::string("training.kernels: ") + spec_rules::kFusedKernelsNeedCudaMessage);
  }
  // The device left unspecified resolves to the CPU where no CUDA device is found.
  try {
    ValidateKernelsRunnable(fused, /*cuda_device=*/false);
    FAIL() << "FUSED without a CUDA device must be rejected";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.kernels");
  }
  ExperimentSpec aten = fused;
  aten.training.kernels = plain::KernelsImpl::kAten;
  ValidateKernelsRunnable(aten, /*cuda_device=*/false);
#ifdef VRAMLAB_WITH_FUSED_KERNELS
  ValidateKernelsRunnable(fused, /*cuda_device=*/true);
#else
  try {
    ValidateKernelsRunnable(fused, /*cuda_device=*/true);
    FAIL() << "a worker built without the kernels must reject FUSED";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.kernels");
    EXPECT_EQ(std::string(e.what()),
              std::string("training.kernels: ") + spec_rules::kFusedKernelsNotBuiltMessage);
  }
#endif
}

TEST(SpecParserTest, ReadsAdaptersWithPeftDefaults) {
  const ExperimentSpec none = ParseExperimentSpec(R"({"model": {"preset": "tiny"}})");
  EXPECT_FALSE(AdapterEnabled(none.training.adapter));
  const ExperimentSpec lora = ParseExperimentSpec(
      R"({"model": {"preset": "tiny"}, "training": {"adapter": {"kind": "LORA"}}})");
  EXPECT_EQ(lora.training.adapter.kind, AdapterKind::kLora);
  EXPECT_EQ(lora.training.adapter.rank, 8);
  EXPECT_DOUBLE_EQ(lora.training.adapter.alpha, 8);
  EXPECT_DOUBLE_EQ(lora.training.adapter.dropout, 0);
  EXPECT_EQ(lora.training.adapter.dtype, DType::kFloat32);
  EXPECT_EQ(lora.training.adapter.target_modules,
            (std::vector<AdapterTarget>{AdapterTarget::kQProj, AdapterTarget::kKProj,
                                        AdapterTarget::kVProj, AdapterTarget::kOProj,
                                        AdapterTarget::kGateProj, AdapterTarget::kUpProj,
                                        AdapterTarget::kDownProj}));
  const ExperimentSpec some = ParseExperimentSpec(
      R"({"model": {"preset": "tiny"}, "training": {"adapter": {"kind": 2, "rank": 16, "alpha": 32,
          "targetModules": ["DOWN_PROJ", "Q_PROJ", 4, "Q_PROJ"], "dtype": "BFLOAT16"}}})");
  EXPECT_EQ(some.training.adapter.kind, AdapterKind::kQlora);
  EXPECT_EQ(some.training.adapter.target_modules,
            (std::vector<AdapterTarget>{AdapterTarget::kQProj, AdapterTarget::kOProj,
                                        AdapterTarget::kDownProj}));
  EXPECT_EQ(some.training.adapter.dtype, DType::kBfloat16);
}

TEST(SpecParserTest, RejectsBadAdaptersNamingTheField) {
  const auto adapter = [](const std::string& fields, const std::string& training = "") {
    return R"({"model": {"preset": "tiny"}, "training": {)" + training +
           R"("adapter": {"kind": "LORA", )" + fields + "}}}";
  };
  EXPECT_EQ(ErrorField(adapter(R"("rank": -4)")), "training.adapter.rank");
  EXPECT_EQ(ErrorField(adapter(R"("alpha": -1)")), "training.adapter.alpha");
  EXPECT_EQ(ErrorField(adapter(R"("dropout": 1.0)")), "training.adapter.dropout");
  EXPECT_EQ(ErrorField(adapter(R"("dropout": -0.1)")), "training.adapter.dropout");
  EXPECT_EQ(ErrorField(adapter(R"("target_modules": ["Q_PROJ", "LM_HEAD"])")),
            "training.adapter.target_modules[1]");
  EXPECT_EQ(ErrorField(adapter(R"("target_modules": [9])")), "training.adapter.target_modules[0]");
  EXPECT_EQ(ErrorField(adapter(R"("target_modules": ["ADAPTER_TARGET_UNSPECIFIED"])")),
            "training.adapter.target_modules[0]");
  EXPECT_EQ(ErrorField(adapter(R"("bias": "all")")), "training.adapter.bias");
  EXPECT_EQ(ErrorField(R"({"model": {"preset": "tiny"}, "training": {"dtype": "FLOAT32",
                          "adapter": {"kind": "QLORA"}}})"),
            "training.dtype");

  // The preset's shapes are known at parse time: tiny's k_proj maps 64 -> 2 heads x 16 = 32.
  try {
    ParseExperimentSpec(adapter(R"("rank": 33)"));
    ADD_FAILURE() << "rank 33 accepted for 64 -> 32 projections";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.adapter.rank");
    EXPECT_STREQ(e.what(),
                 "training.adapter.rank: must be at most 32 (min(in_features, out_features) of a "
                 "wrapped layer), got 33");
  }
  EXPECT_NO_THROW(
      ParseExperimentSpec(adapter(R"("rank": 64, "target_modules": ["Q_PROJ", "O_PROJ"])")));
}

// A weights_dir's shapes come with its config.json: the rules that need them wait for the load.
ExperimentSpec WithWeights(const std::string& training) {
  return ParseExperimentSpec(R"({"model": {"weightsDir": "/models/tiny"}, "training": )" +
                             training + "}");
}

TEST(SpecParserTest, TheLoadedModelsShapesBoundTheAdapterRank) {
  ExperimentSpec too_big =
      WithWeights(R"({"dtype": "FLOAT32", "adapter": {"kind": "LORA", "rank": 33}})");
  try {
    ResolveAgainstModel(too_big, {512, 64, 176, 4, 2});
    ADD_FAILURE() << "rank 33 accepted for 64 -> 32 projections";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.adapter.rank");
  }
  ExperimentSpec fits = WithWeights(
      R"({"dtype": "FLOAT32", "adapter": {"kind": "LORA", "rank": 64, "target_modules": ["Q_PROJ", "O_PROJ"]}})");
  EXPECT_NO_THROW(ResolveAgainstModel(fits, {512, 64, 176, 4, 2}));
}

TEST(SpecParserTest, TokenBoundDefaultsToTheVocabularyWhenSmaller) {
  EXPECT_EQ(ParseExperimentSpec(R"({"model": {"preset": "tiny"}})").training.data.token_id_bound,
            512);
  ExperimentSpec small = WithWeights("{}");
  ResolveAgainstModel(small, {512, 64, 176, 4, 2});
  EXPECT_EQ(small.training.data.token_id_bound, 512);
  ExperimentSpec large = WithWeights("{}");
  ResolveAgainstModel(large, {151936, 1536, 8960, 12, 2});
  EXPECT_EQ(large.training.data.token_id_bound, 1000);
  ExperimentSpec too_big = WithWeights(R"({"data": {"tokenIdBound": 600}})");
  try {
    ResolveAgainstModel(too_big, {512, 64, 176, 4, 2});
    FAIL() << "a bound above the vocabulary must be rejected";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "training.data.token_id_bound");
  }
}

}  // namespace
}  // namespace vramlab::worker
