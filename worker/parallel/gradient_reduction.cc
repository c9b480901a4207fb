#include "worker/parallel/gradient_reduction.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "worker/parallel/model_units.h"

namespace vramlab::worker {

GradientReduction::GradientReduction(RankGroup* group, Qwen2ForCausalLMImpl& model,
                                     std::vector<torch::Tensor> parameters, std::vector<int> owner,
                                     Sharding sharding)
    : group_(group),
      model_(model.model.ptr()),
      parameters_(std::move(parameters)),
      owner_(std::move(owner)),
      sharding_(sharding) {
  if (owner_.size() != parameters_.size())
    throw std::invalid_argument("GradientReduction: one owner per parameter");
  std::unordered_map<const void*, size_t> index_of;  // TensorImpl -> parameters_ index
  for (size_t i = 0; i < parameters_.size(); ++i)
    index_of[parameters_[i].unsafeGetTensorImpl()] = i;
  for (std::vector<size_t>& indices : ModelUnits(*model_, index_of, parameters_.size())) {
    Unit unit;
    unit.parameters = std::move(indices);
    units_.push_back(std::move(unit));
  }
  model_->set_unit_hooks(this);
}

GradientReduction::~GradientReduction() {
  // Normally nothing is pending here (Finish waits for everything). After an exception a
  // collective may still write a gradient: it is waited for (its destructor drops any error)
  // before the gradient can be freed.
  pending_.reset();
  model_->set_unit_hooks(nullptr);
}

void GradientReduction::Begin(bool last) { last_ = last; }

void GradientReduction::BeforeRoot() {
  if (torch::GradMode::is_enabled() && Synced()) units_.back().awaiting_backward = true;
}

torch::Tensor GradientReduction::BeforeLayer(size_t index, const torch::Tensor& input) {
  if (!torch::GradMode::is_enabled() || !Synced()) return input;
  Unit& unit = units_.at(index);
  unit.awaiting_backward = true;
  if (input.requires_grad()) {
    // Runs once the layer's backward is done, before the layer below's first node.
    input.register_hook([this, index](const torch::Tensor&) {
      if (Reduce(units_[index])) ++units_reduced_in_backward_;
    });
  }
  return input;
}

bool GradientReduction::Reduce(Unit& unit) {
  if (!unit.awaiting_backward) return false;
  unit.awaiting_backward = false;
  if (unit.parameters.empty()) return false;
  torch::NoGradGuard no_grad;
  std::unique_ptr<PendingCollective> issued;
  int64_t released_bytes = 0;
  if (sharding_ == Sharding::kShardGradients) {
    std::vector<RootedTensor> rooted;
    for (size_t index : unit.parameters) {
      torch::Tensor& grad = parameters_[index].mutable_grad();
      if (!grad.defined()) grad = torch::zeros_like(parameters_[index]);
      rooted.emplace_back(grad, owner_[index]);
    }
    issued = group_->StartReduceSum(rooted);
    // The collective holds the others' gradients until it completes; the rank lets go of them now.
    for (size_t index : unit.parameters) {
      if (owner_[index] == group_->rank()) continue;
      released_bytes += parameters_[index].grad().nbytes();
      parameters_[index].mutable_grad().reset();
    }
  } else {
    std::vector<torch::Tensor> grads;
    for (size_t index : unit.parameters) {
      torch::Tensor& grad = parameters_[index].mutable_grad();
      if (!grad.defined()) grad = torch::zeros_like(parameters_[index]);
      grads.push_back(grad);
    }
    issued = group_->StartAllReduceSum(grads);
  }
  communication_bytes_ += released_bytes;
  peak_communication_bytes_ = std::max(peak_communication_bytes_, communication_bytes_);
  FinishPending();
  pending_ = std::move(issued);
  pending_bytes_ = released_bytes;
  return true;
}

void GradientReduction::FinishPending() {
  if (!pending_) return;
  const std::unique_ptr<PendingCollective> pending = std::move(pending_);
  pending->Wait();
  communication_bytes_ -= pending_bytes_;
  pending_bytes_ = 0;
}

void GradientReduction::Finish() {
  // The layers from the top down, then the root: the order autograd would have finished them.
  auto reduce_after_backward = [this](Unit& unit) {
    if (Reduce(unit)) ++units_reduced_after_backward_;
  };
  for (size_t i = units_.size() - 1; i-- > 0;) reduce_after_backward(units_[i]);
  reduce_after_backward(units_.back());
  FinishPending();
  if (!last_) return;
  // Every gradient the rank holds is a sum over the ranks now (SHARD_GRADIENTS: its own only).
  torch::NoGradGuard no_grad;
  const double scale = 1.0 / group_->world_size();
  for (torch::Tensor& p : parameters_) {
    if (p.grad().defined()) p.mutable_grad().mul_(scale);
  }
}

}  // namespace vramlab::worker
