#include "worker/model/checkpoint.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace vramlab::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor GeneratorState(const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetGeneratorState(const torch::Device& device, const torch::Tensor& state) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// The layer's trainable parameters are explicit inputs of the function, so that backward returns
// their gradients through autograd (AccumulateGrad, hooks) instead of writing .grad behind its
// back.
class CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               torch::TensorList params, Qwen2DecoderLayerImpl* layer,
                               const DecoderInputs* in) {
    ctx->save_for_backward({hidden});
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["num_params"] = static_cast<int64_t>(params.size());
    ctx->saved_data["cos"] = in->cos;
    ctx->saved_data["sin"] = in->sin;
    ctx->saved_data["attention"] = static_cast<int64_t>(in->attention);
    ctx->saved_data["sdpa_native_gqa"] = in->sdpa_native_gqa;
    if (in->causal_mask.defined()) ctx->saved_data["causal_mask"] = in->causal_mask;
    if (in->window_mask.defined()) ctx->saved_data["window_mask"] = in->window_mask;
    if (in->preserve_rng_state) ctx->saved_data["rng_state"] = GeneratorState(hidden.device());
    torch::NoGradGuard no_grad;
    return layer->forward(hidden, *in);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* layer = reinterpret_cast<Qwen2DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    DecoderInputs in;
    in.cos = ctx->saved_data["cos"].toTensor();
    in.sin = ctx->saved_data["sin"].toTensor();
    in.attention = static_cast<AttentionImpl>(ctx->saved_data["attention"].toInt());
    in.sdpa_native_gqa = ctx->saved_data["sdpa_native_gqa"].toBool();
    if (ctx->saved_data.count("causal_mask") != 0) {
      in.causal_mask = ctx->saved_data["causal_mask"].toTensor();
    }
    if (ctx->saved_data.count("window_mask") != 0) {
      in.window_mask = ctx->saved_data["window_mask"].toTensor();
    }
    std::vector<torch::Tensor> wrt;
    torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    wrt.push_back(input);
    for (const torch::Tensor& p : layer->parameters()) {
      if (p.requires_grad()) wrt.push_back(p);
    }
    TORCH_CHECK(static_cast<int64_t>(wrt.size()) - 1 == ctx->saved_data["num_params"].toInt(),
                "checkpointed layer: trainable parameters changed between forward and backward");
    torch::Tensor output;
    {
      // Replays the forward's random numbers, then puts the generator back where it was.
      std::optional<torch::Tensor> resume_state;
      if (ctx->saved_data.count("rng_state") != 0) {
        resume_state = GeneratorState(input.device());
        SetGeneratorState(input.device(), ctx->saved_data["rng_state"].toTensor());
      }
      torch::AutoGradMode enable_grad(true);
      output = layer->forward(input, in);
      if (resume_state) SetGeneratorState(input.device(), *resume_state);
    }
    variable_list grads = torch::autograd::grad({output}, wrt, {grad_outputs[0]},
                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    grads.emplace_back();  // layer pointer
    grads.emplace_back();  // decoder inputs pointer
    return grads;
  }
};

}  // namespace

torch::Tensor CheckpointedLayerForward(Qwen2DecoderLayerImpl& layer, const torch::Tensor& hidden,
                                       const DecoderInputs& in) {
  if (!torch::GradMode::is_enabled()) return layer.forward(hidden, in);
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : layer.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return CheckpointedLayer::apply(hidden, torch::TensorList(params), &layer, &in);
}

}  // namespace vramlab::worker
