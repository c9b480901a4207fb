// The Optimizer behind every OptimizerKind: an UpdateRule (the algorithm and its state) driven on
// the parameters' device, on the host (offload_to_cpu or CPU parameters), and either from Step()
// or from inside backward (in_backward), with the offloaded host step optionally one step late
// (delayed_update). Internal to worker/optim; use MakeOptimizer().
#ifndef VRAMLAB_WORKER_OPTIM_RULE_OPTIMIZER_H_
#define VRAMLAB_WORKER_OPTIM_RULE_OPTIMIZER_H_

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/optim/delayed_update_pipeline.h"
#include "worker/optim/grad_ready_hooks.h"
#include "worker/optim/host_stepper.h"
#include "worker/optim/offload_pipeline.h"
#include "worker/optim/optimizer.h"
#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {

class RuleOptimizer final : public Optimizer {
 public:
  // `params`: distinct, validated leaf tensors on one device. With offload_to_cpu (and not
  // in_backward) on CUDA parameters, the host step overlaps backward (offload_pipeline.h);
  // `overlap_on_cpu` makes CPU parameters take that path too (tests: the order of operations is
  // the same, the copies synchronous). With delayed_update the host step runs in a
  // DelayedUpdatePipeline on every device (CPU parameters included), so that a run means the same
  // on each.
  RuleOptimizer(std::vector<torch::Tensor> params, std::unique_ptr<UpdateRule> rule,
                const OptimizerOptions& options, bool overlap_on_cpu = false);
  ~RuleOptimizer() override;

  void Step() override;
  void ZeroGrad() override;
  void ExpectStepAfterNextBackward() override;
  int64_t DeviceStateBytes() const override;
  int64_t HostStateBytes() const override;
  std::string Describe() const override;
  std::string HostStepSummary() const override;
  void Finish() override;

 private:
  // Updates params_[i] for every i in `indices` from its gradient (each must have one).
  void Update(const std::vector<size_t>& indices);
  // Whole-tensor multi-tensor path, else rule ranges of bounded size, on the parameters' device.
  void UpdateOnDevice(const std::vector<size_t>& indices, int64_t step);
  // In-backward: the complete gradient of params_[index] has just been accumulated.
  void OnGradReady(size_t index);
  // Overlapped offload: the same, in a backward announced by ExpectStepAfterNextBackward.
  void OnGradReadyOverlapped(size_t index);
  // Step() with delayed_update: publishes the pending update, applies gradients from outside the
  // announced backward at once, starts the update of the announced ones.
  void StepDelayed();

  const std::vector<torch::Tensor> params_;
  const std::unique_ptr<UpdateRule> rule_;
  const OptimizerOptions options_;
  const torch::Device device_;
  const StatePlacement placement_;
  // steps_[i]: updates applied to params_[i] so far (torch.optim's per-parameter "step").
  std::vector<int64_t> steps_;
  HostStepper host_stepper_;
  // Overlapped offload only: the pipeline (one of the two); whether the running backward was
  // announced; which parameters it has queued (written by the backward thread, read by Step()
  // after backward).
  std::unique_ptr<OffloadPipeline> pipeline_;
  std::unique_ptr<DelayedUpdatePipeline> delayed_;
  std::atomic<bool> armed_{false};
  std::vector<char> queued_;
  // Declared last so the hooks, which call back into this object, are removed first.
  std::unique_ptr<GradReadyHooks> grad_ready_hooks_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_RULE_OPTIMIZER_H_
