#include "worker/adapters/lora_linear.h"

namespace vramlab::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// B(A(x)) * scaling without dropout. Autograd would save x cast to the adapter dtype for A's
// gradient (PEFT does: a [tokens, in] fp32 copy per wrapped layer over a bf16 base); this saves
// x itself, which the surrounding layer holds anyway, and casts it again in backward. Same
// arithmetic, in autograd's order.
class LoraUpdateFunction : public torch::autograd::Function<LoraUpdateFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& a,
                               const torch::Tensor& b, double scaling) {
    torch::Tensor h = torch::linear(x.to(a.scalar_type()), a);
    ctx->save_for_backward({x, a, b, h});
    ctx->saved_data["scaling"] = scaling;
    return torch::linear(h, b) * scaling;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &a = saved[1], &b = saved[2], &h = saved[3];
    const double scaling = ctx->saved_data["scaling"].toDouble();
    const int64_t rank = a.size(0), in = a.size(1), out = b.size(0);
    const torch::Tensor grad = grad_outputs[0] * scaling;
    const torch::Tensor grad_flat = grad.reshape({-1, out});
    const torch::Tensor grad_h = grad.matmul(b);
    torch::Tensor grad_b = grad_flat.t().mm(h.reshape({-1, rank}));
    torch::Tensor grad_a = grad_h.reshape({-1, rank}).t().mm(x.to(a.scalar_type()).reshape({-1, in}));
    torch::Tensor grad_x;
    if (ctx->needs_input_grad(0)) grad_x = grad_h.matmul(a).to(x.scalar_type());
    return {grad_x, grad_a, grad_b, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor LoraLinear::Update(const torch::Tensor& x, bool training) const {
  if (dropout_ > 0 && training) {
    // PEFT: lora_B(lora_A(dropout(x))) * scaling, in that order.
    torch::Tensor h = torch::dropout(x.to(a_->weight.scalar_type()), dropout_, training);
    return torch::linear(torch::linear(h, a_->weight), b_->weight) * scaling_;
  }
  return LoraUpdateFunction::apply(x, a_->weight, b_->weight, scaling_);
}

torch::Tensor LoraLinear::Forward(LinearImpl& base, const torch::Tensor& x) {
  torch::Tensor result = torch::linear(x, base.weight, base.bias);
  const torch::ScalarType result_dtype = result.scalar_type();
  result = result + Update(x, base.is_training());
  return result.scalar_type() == result_dtype ? result : result.to(result_dtype);
}

}  // namespace vramlab::worker
