// sdpa against eager attention on the GPU, element by element, with Qwen2.5-1.5B's attention shape
// (12 query heads, 2 KV heads, head_dim 128): fused backends have had bugs with few KV heads, so
// every fused backend LibTorch offers is forced in turn, with the KV heads repeated and native
// (enable_gqa), in fp32 and bf16, and its logits and every parameter's gradient are compared with
// fp32 eager attention. Compiled only when LibTorch has CUDA (the GPU host).
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(VRAMLAB_WITH_CUDA)

#include <ATen/Context.h>
#include <torch/version.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_model.h"

namespace vramlab::worker {
namespace {

struct StepResult {
  torch::Tensor logits;  // fp32, on the CPU
  std::map<std::string, torch::Tensor> grads;
  std::string backend;
};

// The 1.5B attention and MLP shapes with two layers and a small vocabulary, so the test is fast.
DecoderConfig TestConfig() {
  DecoderConfig config = PresetConfig("qwen2.5-1.5b");
  config.num_hidden_layers = 2;
  config.vocab_size = 2048;
  return config;
}

// Only `backend` enabled ("auto": LibTorch's own choice among all); restores the flags after.
class SdpBackendScope {
 public:
  explicit SdpBackendScope(const std::string& backend) {
    auto& ctx = at::globalContext();
    flash_ = ctx.userEnabledFlashSDP();
    efficient_ = ctx.userEnabledMemEfficientSDP();
    math_ = ctx.userEnabledMathSDP();
    cudnn_ = ctx.userEnabledCuDNNSDP();
    if (backend == "auto") return;
    ctx.setSDPUseFlash(backend == "flash");
    ctx.setSDPUseMemEfficient(backend == "efficient");
    ctx.setSDPUseMath(backend == "math");
    ctx.setSDPUseCuDNN(backend == "cudnn");
  }
  ~SdpBackendScope() {
    auto& ctx = at::globalContext();
    ctx.setSDPUseFlash(flash_);
    ctx.setSDPUseMemEfficient(efficient_);
    ctx.setSDPUseMath(math_);
    ctx.setSDPUseCuDNN(cudnn_);
  }

 private:
  bool flash_, efficient_, math_, cudnn_;
};

class SdpaCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::globalContext().setAllowTF32CuBLAS(false);  // fp32 means fp32 for the reference
    const DecoderConfig config = TestConfig();
    ModelOptions options;
    options.device = torch::kCUDA;
    reference_model_ = Qwen2ForCausalLM(config, options);
    InitializeWeights(*reference_model_, /*seed=*/7, config.initializer_range);
    torch::manual_seed(11);
    ids_ = torch::randint(0, config.vocab_size, {2, 256}, torch::kInt64).to(torch::kCUDA);
    labels_ = ids_.clone();
    reference_ = Run(reference_model_);
  }

  // A model like the reference, with its weights, in `dtype` with `attention`.
  Qwen2ForCausalLM Copy(AttentionImpl attention, bool native_gqa, torch::Dtype dtype) {
    ModelOptions options;
    options.device = torch::kCUDA;
    options.dtype = dtype;
    options.attention = attention;
    options.sdpa_native_gqa = native_gqa;
    Qwen2ForCausalLM model(TestConfig(), options);
    torch::NoGradGuard no_grad;
    auto source = reference_model_->named_parameters();
    for (auto& item : model->named_parameters()) item.value().copy_(source[item.key()]);
    return model;
  }

  StepResult Run(Qwen2ForCausalLM& model) {
    model->zero_grad();
    StepResult r;
    r.logits = model->Logits(ids_).detach().to(torch::kFloat32).cpu();
    CausalLmLoss(model, ids_, labels_, LossImpl::kFull, 0).backward();
    for (const auto& item : model->named_parameters()) {
      r.grads[item.key()] = item.value().grad().to(torch::kFloat32).cpu();
    }
    r.backend = model->attention_backend();
    return r;
  }

  // Largest logit difference relative to the largest reference logit, and the largest relative
  // gradient-norm difference over all parameters (with its parameter's name).
  struct Error {
    double logits = 0;
    double grads = 0;
    std::string worst_param;
  };
  Error Compare(const StepResult& r) const {
    Error e;
    e.logits = (r.logits - reference_.logits).abs().max().item<double>() /
               reference_.logits.abs().max().item<double>();
    for (const auto& [name, ref] : reference_.grads) {
      const double rel = (r.grads.at(name) - ref).norm().item<double>() /
                         std::max(ref.norm().item<double>(), 1e-30);
      if (rel > e.grads) {
        e.grads = rel;
        e.worst_param = name;
      }
    }
    return e;
  }

  Qwen2ForCausalLM reference_model_{nullptr};
  torch::Tensor ids_, labels_;
  StepResult reference_;
};

TEST_F(SdpaCudaTest, EveryFusedBackendMatchesEagerWithTwoKvHeads) {
  const std::vector<std::string> backends = {"auto", "flash", "cudnn", "efficient", "math"};
  std::map<torch::Dtype, Error> eager_error;
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    Qwen2ForCausalLM eager = Copy(AttentionImpl::kEager, false, dtype);
    eager_error[dtype] = Compare(Run(eager));
  }
  // fp32 eager is the reference itself; bf16 eager's distance from it is the rounding budget.
  EXPECT_EQ(eager_error[torch::kFloat32].logits, 0.0);
  const Error bf16_budget = eager_error[torch::kBFloat16];
  std::cout << "bf16 eager vs fp32 eager: logits " << bf16_budget.logits << ", grads "
            << bf16_budget.grads << " (" << bf16_budget.worst_param << ")\n";

  int fused_bf16_runs = 0;
  for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (bool native_gqa : {false, true}) {
      for (const std::string& backend : backends) {
        const std::string label = std::string(dtype == torch::kFloat32 ? "fp32" : "bf16") +
                                  (native_gqa ? " native-gqa " : " repeated-kv ") + backend;
        StepResult result;
        try {
          SdpBackendScope scope(backend);
          Qwen2ForCausalLM sdpa = Copy(AttentionImpl::kSdpa, native_gqa, dtype);
          result = Run(sdpa);
        } catch (const c10::Error& e) {
          // A backend that does not take this shape/dtype refuses up front ("No available kernel").
          ASSERT_NE(backend, "auto") << label << ": " << e.what();
          std::cout << label << ": not available\n";
          continue;
        }
        const Error e = Compare(result);
        std::cout << label << " ran as " << result.backend << ": logits " << e.logits << ", grads "
                  << e.grads << " (" << e.worst_param << ")\n";
        if (dtype == torch::kFloat32) {
          EXPECT_LT(e.logits, 1e-4) << label;
          EXPECT_LT(e.grads, 1e-4) << label << " " << e.worst_param;
        } else {
          // No worse than eager attention in the same dtype, with a little room for the different
          // summation order; a GQA bug gives errors of order 1.
          EXPECT_LT(e.logits, 2 * bf16_budget.logits + 1e-3) << label;
          EXPECT_LT(e.grads, 2 * bf16_budget.grads + 1e-3) << label << " " << e.worst_param;
          if (backend == "flash" || backend == "cudnn") ++fused_bf16_runs;
        }
      }
    }
  }
  // The kernels that run in real bf16 training must have been among those checked.
  EXPECT_GT(fused_bf16_runs, 0);
}

}  // namespace
}  // namespace vramlab::worker

#endif  // VRAMLAB_WITH_CUDA
