#include "worker/model/loss.h"

#include <algorithm>
#include <stdexcept>

namespace vramlab::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace F = torch::nn::functional;

// One chunk's logits as a fresh fp32 tensor the caller may overwrite: the param-dtype matmul
// output lives only until the upcast.
torch::Tensor ChunkLogitsFp32(const torch::Tensor& hidden, const torch::Tensor& weight) {
  return torch::linear(hidden, weight).to(torch::kFloat32);
}

// Turns logits [c, v] into exp(logits - rowmax) in place and returns the row maxima [c, 1]. The
// in-place softmax keeps one fp32 [c, v] buffer per chunk where at::softmax / log_softmax would
// hold two (input and output).
torch::Tensor ShiftedExpInPlace(torch::Tensor& logits) {
  torch::Tensor row_max = logits.amax(/*dim=*/1, /*keepdim=*/true);
  logits.sub_(row_max).exp_();
  return row_max;
}

// Forward keeps hidden, weight and targets (which exist anyway) and a scalar; no logits survive a
// chunk. Backward recomputes each chunk's logits and forms d(loss)/d(logits) = (softmax - onehot)
// * grad / count in fp32, cast to the parameter dtype for the two matmuls, as the autograd graph
// of the full loss does (its ToCopy backward casts the fp32 logits gradient back).
class ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t chunk_tokens) {
    const int64_t n = hidden.size(0);
    const torch::Tensor valid = targets.ne(kIgnoreIndex);
    // Ignored rows read class 0 and are multiplied by 0 below.
    const torch::Tensor safe_targets = targets.masked_fill(valid.logical_not(), 0);
    torch::Tensor loss_sum = torch::zeros({}, hidden.options().dtype(torch::kFloat32));
    for (int64_t start = 0; start < n; start += chunk_tokens) {
      const int64_t end = std::min(n, start + chunk_tokens);
      torch::Tensor logits = ChunkLogitsFp32(hidden.slice(0, start, end), weight);
      const torch::Tensor target_logit =
          logits.gather(1, safe_targets.slice(0, start, end).unsqueeze(1)).squeeze(1);
      const torch::Tensor row_max = ShiftedExpInPlace(logits);
      // -log softmax[target] = log(sum exp(x - max)) + max - x_target
      const torch::Tensor nll = logits.sum(1).log_().add_(row_max.squeeze(1)).sub_(target_logit);
      loss_sum += nll.mul_(valid.slice(0, start, end)).sum();
    }
    // A tensor, not .item(): no device synchronization inside the step.
    torch::Tensor count = valid.sum().to(torch::kFloat32);
    ctx->save_for_backward({hidden, weight, targets, count});
    ctx->saved_data["chunk_tokens"] = chunk_tokens;
    return loss_sum / count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& targets = saved[2];
    const int64_t chunk_tokens = ctx->saved_data["chunk_tokens"].toInt();
    const torch::Tensor scale = grad_outputs[0].to(torch::kFloat32) / saved[3];
    torch::Tensor grad_hidden = torch::empty_like(hidden, torch::MemoryFormat::Contiguous);
    // Accumulated chunk by chunk in the parameter dtype (no fp32 copy of a vocab x hidden matrix).
    torch::Tensor grad_weight = torch::zeros_like(weight, torch::MemoryFormat::Contiguous);
    const int64_t n = hidden.size(0);
    for (int64_t start = 0; start < n; start += chunk_tokens) {
      const int64_t end = std::min(n, start + chunk_tokens);
      const torch::Tensor h = hidden.slice(0, start, end);
      const torch::Tensor t = targets.slice(0, start, end);
      const torch::Tensor valid = t.ne(kIgnoreIndex);
      torch::Tensor grad_logits = ChunkLogitsFp32(h, weight);
      ShiftedExpInPlace(grad_logits);
      grad_logits.div_(grad_logits.sum(1, /*keepdim=*/true));  // softmax
      grad_logits.scatter_add_(1, t.masked_fill(valid.logical_not(), 0).unsqueeze(1),
                               -torch::ones({end - start, 1}, grad_logits.options()));
      grad_logits.mul_((valid.to(torch::kFloat32) * scale).unsqueeze(1));
      torch::Tensor g = grad_logits.to(weight.scalar_type());
      grad_logits = torch::Tensor();  // frees the fp32 chunk unless g is the same tensor
      // Rows start..end of a contiguous [n, h] tensor are contiguous: written in place.
      torch::Tensor grad_rows = grad_hidden.slice(0, start, end);
      torch::mm_out(grad_rows, g, weight);
      grad_weight.addmm_(g.t(), h);
    }
    return {grad_hidden, grad_weight, torch::Tensor(), torch::Tensor()};
  }
};

void CheckTokens(const torch::Tensor& input_ids, const torch::Tensor& labels) {
  if (input_ids.dim() != 2 || input_ids.scalar_type() != torch::kInt64) {
    throw std::invalid_argument("input_ids must be an int64 tensor [batch, seq]");
  }
  if (!labels.sizes().equals(input_ids.sizes()) || labels.scalar_type() != torch::kInt64) {
    throw std::invalid_argument("labels must be an int64 tensor shaped like input_ids");
  }
}

}  // namespace

torch::Tensor ShiftLabels(const torch::Tensor& labels) {
  torch::Tensor last = torch::full({labels.size(0), 1}, kIgnoreIndex, labels.options());
  return torch::cat({labels.slice(1, 1), last}, 1);
}

torch::Tensor ChunkedLinearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t chunk_tokens) {
  if (chunk_tokens <= 0) {
    throw std::invalid_argument("chunked loss needs chunk_tokens > 0, got " +
                                std::to_string(chunk_tokens));
  }
  if (hidden.dim() != 2 || weight.dim() != 2 || hidden.size(1) != weight.size(1) ||
      targets.dim() != 1 || targets.size(0) != hidden.size(0)) {
    throw std::invalid_argument("chunked loss: expected hidden [n, h], weight [v, h], targets [n]");
  }
  return ChunkedCrossEntropy::apply(hidden, weight, targets, chunk_tokens);
}

torch::Tensor CausalLmLoss(Qwen2ForCausalLM& model, const torch::Tensor& input_ids,
                           const torch::Tensor& labels, LossImpl impl, int64_t chunk_tokens) {
  CheckTokens(input_ids, labels);
  const torch::Tensor targets = ShiftLabels(labels.to(input_ids.device())).reshape({-1});
  if (impl == LossImpl::kChunked && chunk_tokens <= 0) {
    throw std::invalid_argument("chunked loss needs chunk_tokens > 0, got " +
                                std::to_string(chunk_tokens));
  }
  if (model->options().kernels == KernelsImpl::kFused) {
    // kFull: one chunk of every token, so the full logits exist once, in the parameter dtype.
    torch::Tensor hidden = model->Hidden(input_ids);
    hidden = hidden.reshape({-1, hidden.size(-1)});
    return FusedLinearCrossEntropyOp(hidden, model->LmHeadWeight(), targets,
                                     impl == LossImpl::kChunked ? chunk_tokens : hidden.size(0),
                                     kIgnoreIndex);
  }
  if (impl == LossImpl::kChunked) {
    torch::Tensor hidden = model->Hidden(input_ids);
    return ChunkedLinearCrossEntropy(hidden.reshape({-1, hidden.size(-1)}), model->LmHeadWeight(),
                                     targets, chunk_tokens);
  }
  torch::Tensor logits = model->Logits(input_ids);
  const int64_t vocab = logits.size(-1);
  return F::cross_entropy(
      logits.to(torch::kFloat32).view({-1, vocab}), targets,
      F::CrossEntropyFuncOptions().reduction(torch::kMean).ignore_index(kIgnoreIndex));
}

}  // namespace vramlab::worker
