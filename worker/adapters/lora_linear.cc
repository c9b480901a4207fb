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
    torch::Tensor grad_a =
        grad_h.reshape({-1, rank}).t().mm(x.to(a.scalar_type()).reshape({-1, in}));
    torch::Tensor grad_x;
    if (ctx->needs_input_grad(0)) grad_x = grad_h.matmul(a).to(x.scalar_type());
    return {grad_x, grad_a, grad_b, torch::Tensor()};
  }
};

// [..., n] as a matrix [rows, n].
torch::Tensor Rows(const torch::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// The whole wrapped layer without dropout, as one autograd node: PEFT's
//
//   y = (base(x) + linear(linear(x.to(A's dtype), A), B) * scaling).to(base(x)'s dtype)
//
// with the adapter path's output, its scaling and the sum in one GEMM (addmm's alpha and beta),
// so the [tokens, out] tensors of the adapter's dtype are written once rather than three times,
// and backward takes the base's gradient in its own dtype, converting it to the adapter's dtype
// once and scaling only the rank-sized products. Same arithmetic as PEFT's up to the order of
// fp32 roundings. Saves x (which the surrounding layer holds anyway) rather than its cast to the
// adapter dtype, which PEFT's autograd keeps for A's gradient, and casts it again in backward.
// The base weight and bias are frozen (no gradient is computed for them); the bias is passed by
// pointer because an undefined tensor cannot be an autograd input.
class LoraLinearFunction : public torch::autograd::Function<LoraLinearFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor* bias,
                               const torch::Tensor& a, const torch::Tensor& b, double scaling) {
    const torch::Tensor result = torch::linear(x, weight, *bias);
    const torch::Tensor h = torch::linear(x.to(a.scalar_type()), a);
    const torch::Tensor sum = torch::addmm(Rows(result).to(a.scalar_type()), Rows(h), b.t(),
                                           /*beta=*/1, /*alpha=*/scaling);
    ctx->save_for_backward({x, weight, a, b, h});
    ctx->saved_data["scaling"] = scaling;
    return sum.to(result.scalar_type()).view(result.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &a = saved[2], &b = saved[3],
                        &h = saved[4];
    const double scaling = ctx->saved_data["scaling"].toDouble();
    const torch::Tensor grad = Rows(grad_outputs[0]);          // the base output's dtype
    const torch::Tensor grad_wide = grad.to(a.scalar_type());  // exact: bf16/fp16 into fp32
    const torch::Tensor grad_h = grad_wide.mm(b).mul_(scaling);
    const torch::Tensor grad_b = grad_wide.t().mm(Rows(h)).mul_(scaling);
    const torch::Tensor x_rows = Rows(x);
    const torch::Tensor grad_a = grad_h.t().mm(x_rows.to(a.scalar_type()));
    torch::Tensor grad_x;
    if (ctx->needs_input_grad(0)) {
      grad_x = (grad.mm(weight) + grad_h.mm(a).to(x.scalar_type())).view(x.sizes());
    }
    return {grad_x, torch::Tensor(), torch::Tensor(), grad_a, grad_b, torch::Tensor()};
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
  const bool training = base.is_training();
  const bool frozen_base =
      !base.weight.requires_grad() && !(base.bias.defined() && base.bias.requires_grad());
  if ((dropout_ == 0 || !training) && frozen_base) {
    return LoraLinearFunction::apply(x, base.weight, &base.bias, a_->weight, b_->weight, scaling_);
  }
  torch::Tensor result = torch::linear(x, base.weight, base.bias);
  const torch::ScalarType result_dtype = result.scalar_type();
  result = result + Update(x, /*training=*/true);
  return result.scalar_type() == result_dtype ? result : result.to(result_dtype);
}

}  // namespace vramlab::worker
