#include "worker/optim/rule_optimizer.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>

namespace vramlab::worker::optim_internal {
namespace {

// State on the host when asked to, or when the parameters live there anyway; pinned only when it
// serves copies to and from a CUDA device.
StatePlacement PlacementFor(const torch::Device& param_device, bool offload) {
  StatePlacement placement;
  if (offload || param_device.is_cpu()) {
    placement.device = torch::kCPU;
    placement.pinned = param_device.is_cuda();
  } else {
    placement.device = param_device;
  }
  return placement;
}

}  // namespace

RuleOptimizer::RuleOptimizer(std::vector<torch::Tensor> params, std::unique_ptr<UpdateRule> rule,
                             const OptimizerOptions& options, bool overlap_on_cpu)
    : params_(std::move(params)),
      rule_(std::move(rule)),
      options_(options),
      device_(params_.at(0).device()),
      placement_(PlacementFor(device_, options.offload_to_cpu)),
      steps_(params_.size(), 0) {
  if (options_.in_backward) {
    grad_ready_hooks_ =
        std::make_unique<GradReadyHooks>(params_, [this](size_t index) { OnGradReady(index); });
  } else if (options_.delayed_update) {
    delayed_ = std::make_unique<DelayedUpdatePipeline>(*rule_, params_, placement_);
    queued_.assign(params_.size(), 0);
    grad_ready_hooks_ = std::make_unique<GradReadyHooks>(
        params_, [this](size_t index) { OnGradReadyOverlapped(index); });
  } else if (options_.offload_to_cpu && (device_.is_cuda() || overlap_on_cpu)) {
    pipeline_ = std::make_unique<OffloadPipeline>(*rule_, params_, placement_);
    queued_.assign(params_.size(), 0);
    grad_ready_hooks_ = std::make_unique<GradReadyHooks>(
        params_, [this](size_t index) { OnGradReadyOverlapped(index); });
  }
}

// The hooks go first (they call into the pipeline), then the pipeline (its thread uses the rule).
RuleOptimizer::~RuleOptimizer() {
  grad_ready_hooks_.reset();
  pipeline_.reset();
  delayed_.reset();
}

void RuleOptimizer::Step() {
  if (options_.in_backward) return;  // every update already happened inside backward
  if (delayed_ != nullptr) return StepDelayed();
  torch::NoGradGuard no_grad;
  std::vector<size_t> queued, rest;
  if (pipeline_ != nullptr) {
    armed_ = false;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (queued_[i]) queued.push_back(i);
      queued_[i] = 0;
    }
    pipeline_->Drain();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined() && !std::binary_search(queued.begin(), queued.end(), i)) {
      rest.push_back(i);
    }
  }
  // Parameters whose gradient came from outside an announced backward: the synchronous way.
  Update(rest);
  if (pipeline_ != nullptr) pipeline_->Forget(rest);
  if (!queued.empty()) pipeline_->Publish(queued);
}

// Update t-1 is published before anything else writes a parameter, so that a synchronous update
// below starts from it and the update started here from what the parameters will hold.
void RuleOptimizer::StepDelayed() {
  torch::NoGradGuard no_grad;
  armed_ = false;
  std::vector<size_t> queued, rest;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (queued_[i]) {
      queued.push_back(i);
    } else if (params_[i].grad().defined()) {
      rest.push_back(i);
    }
    queued_[i] = 0;
  }
  delayed_->Publish(delayed_->WaitForUpdate());
  // Gradients from outside an announced backward: applied now, not delayed.
  Update(rest);
  delayed_->Forget(rest);
  for (size_t i : queued) rule_->EnsureState(i, params_[i], placement_);
  delayed_->Start(queued);
}

void RuleOptimizer::Finish() {
  if (delayed_ == nullptr) return;
  torch::NoGradGuard no_grad;
  delayed_->Publish(delayed_->WaitForUpdate());
}

void RuleOptimizer::ExpectStepAfterNextBackward() {
  if (pipeline_ != nullptr || delayed_ != nullptr) armed_ = true;
}

void RuleOptimizer::OnGradReadyOverlapped(size_t index) {
  if (!armed_) return;
  const torch::Tensor& grad = params_[index].grad();
  // Sparse and empty gradients are left to Step(), which rejects or skips them.
  if (!grad.defined() || grad.is_sparse() || grad.numel() == 0) return;
  queued_[index] = 1;
  if (delayed_ != nullptr) {
    delayed_->Enqueue(index, grad, ++steps_[index]);
  } else {
    pipeline_->Enqueue(index, grad, ++steps_[index]);
  }
}

void RuleOptimizer::ZeroGrad() {
  for (const auto& p : params_) p.mutable_grad().reset();
}

void RuleOptimizer::OnGradReady(size_t index) {
  if (!params_[index].grad().defined()) return;
  Update({index});
  // Dropping the gradient here is the point of this mode: at most the gradients of the
  // parameters whose backward is in flight exist at any time.
  params_[index].mutable_grad().reset();
}

void RuleOptimizer::Update(const std::vector<size_t>& indices) {
  torch::NoGradGuard no_grad;
  for (size_t i : indices) {
    if (params_[i].grad().is_sparse()) {
      throw std::invalid_argument("sparse gradients are not supported by the optimizer");
    }
    rule_->EnsureState(i, params_[i], placement_);
    ++steps_[i];
  }
  if (placement_.device.is_cpu()) {
    for (size_t i : indices) {
      host_stepper_.Update(*rule_, i, steps_[i], params_[i], params_[i].grad());
    }
    return;
  }
  // Parameters that skipped steps (no gradient) are at other step counts; one call per count.
  std::map<int64_t, std::vector<size_t>> by_step;
  for (size_t i : indices) by_step[steps_[i]].push_back(i);
  for (const auto& [step, group] : by_step) UpdateOnDevice(group, step);
}

void RuleOptimizer::UpdateOnDevice(const std::vector<size_t>& indices, int64_t step) {
  std::vector<torch::Tensor> params, grads;
  for (size_t i : indices) {
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
  }
  if (rule_->UpdateWhole(indices, params, grads, step)) return;
  for (size_t k = 0; k < indices.size(); ++k) {
    torch::Tensor param_flat = params[k].view({-1});
    torch::Tensor grad_flat = grads[k].reshape({-1});
    const int64_t n = param_flat.numel();
    for (int64_t begin = 0; begin < n; begin += kStagingChunkElements) {
      const int64_t len = std::min(kStagingChunkElements, n - begin);
      rule_->UpdateRange(indices[k], step, begin, param_flat.narrow(0, begin, len),
                         grad_flat.narrow(0, begin, len));
    }
  }
}

int64_t RuleOptimizer::DeviceStateBytes() const {
  return options_.offload_to_cpu ? 0 : rule_->StateBytes();
}

int64_t RuleOptimizer::HostStateBytes() const {
  if (!options_.offload_to_cpu) return 0;
  return rule_->StateBytes() + host_stepper_.StagingBytes() +
         (pipeline_ != nullptr ? pipeline_->HostBytes() : 0) +
         (delayed_ != nullptr ? delayed_->HostBytes() : 0);
}

std::string RuleOptimizer::Describe() const {
  std::string path;
  if (placement_.device.is_cpu()) {
    path = std::string(options_.offload_to_cpu ? "host-step, " : "per-chunk, ") +
           std::to_string(at::get_num_threads()) + " threads";
    if (pipeline_ != nullptr) path += ", overlapped with backward";
    if (delayed_ != nullptr) {
      path += ", update delayed by one step (overlapped with the next step's forward and backward)";
    }
  } else {
    path = rule_->MultiTensorPath(device_);
    if (path.empty()) path = "per-chunk";
  }
  std::string description =
      rule_->Name() + " " + path + " (" + rule_->StateDescription(params_[0].scalar_type()) + ")";
  if (options_.offload_to_cpu) {
    description += placement_.pinned ? ", state offloaded to pinned host memory"
                                     : ", state offloaded to host memory";
  }
  if (options_.in_backward) description += ", applied in backward";
  return description;
}

std::string RuleOptimizer::HostStepSummary() const {
  if (pipeline_ == nullptr && delayed_ == nullptr) return {};
  const std::vector<OffloadPipeline::StepTimes> steps =
      pipeline_ != nullptr ? pipeline_->Times() : delayed_->Times();
  const int host_threads =
      pipeline_ != nullptr ? pipeline_->HostThreads() : delayed_->HostThreads();
  if (steps.empty()) return {};
  // The first step also allocates and first-touches the host state: reported on its own, and the
  // median of the rest is the steady state.
  auto median = [&](double OffloadPipeline::StepTimes::*field) {
    std::vector<double> values;
    for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i)
      values.push_back(steps[i].*field);
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
  };
  using Times = OffloadPipeline::StepTimes;
  char text[384];
  std::snprintf(text, sizeof(text),
                "host step, median of %zu steps after the first: %.3f s arithmetic on %d threads, "
                "%.3f s waiting for gradient copies, %.3f s after backward ended; first step: "
                "%.3f / %.3f / %.3f s",
                steps.size() > 1 ? steps.size() - 1 : 0, median(&Times::arithmetic_seconds),
                host_threads, median(&Times::copy_wait_seconds), median(&Times::drain_wait_seconds),
                steps[0].arithmetic_seconds, steps[0].copy_wait_seconds,
                steps[0].drain_wait_seconds);
  return text;
}

}  // namespace vramlab::worker::optim_internal
