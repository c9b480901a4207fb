// The gradient collectives of SHARD_NONE, SHARD_OPTIMIZER and SHARD_GRADIENTS (data_parallel.h),
// issued during backward unit by unit, as DDP's buckets and DeepSpeed's ZeRO-2 reduce buckets
// overlap backward: the units are SHARD_FULL's (full_shard.h), one per decoder layer and the root
// (every trainable parameter outside the layers).
//
// A micro-batch is synced or not (Begin): SHARD_NONE and SHARD_OPTIMIZER sync only a step's last
// micro-batch (the others accumulate locally, as DDP's no_sync), SHARD_GRADIENTS every one. In a
// synced micro-batch, through the model's unit hooks (unit_hooks.h):
//
//   backward  a hook on layer i's input runs once the layer's backward has produced every
//             gradient of the layer (autograd runs a leaf's AccumulateGrad before any node of the
//             layer below; full_shard.h). There the layer's collective is issued over its
//             gradients in place: an all-reduce (sum) for SHARD_NONE and SHARD_OPTIMIZER, a
//             reduce (sum) to each gradient's owner for SHARD_GRADIENTS, whose other ranks let go
//             of the gradient at once (the collective holds it until it completes, then it is
//             freed). Then the previous unit's collective is waited for: at most two units' are
//             in flight, so the compute of each layer's backward overlaps the collective of the
//             layer above, and under SHARD_GRADIENTS a rank holds the others' gradients of at
//             most two layers (and the root's) at any moment of backward.
//   Finish    after loss.backward(): the collective of every unit whose hook did not run (an input
//             that needs no gradient, e.g. layer 0's under LoRA) and the root's, last; then
//             everything is waited for. After the step's last micro-batch every gradient the
//             rank's optimizer reads is divided by the world size: the mean over the ranks.
//
// A parameter with no gradient on this rank at its unit's collective (one that took no part in
// this rank's forward) contributes zeros: every rank joins every collective, and every rank makes
// the same ones in the same order because every rank runs the same graph.
//
// Not thread-safe; the hooks run on autograd's thread while the training thread waits in backward.
#ifndef VRAMLAB_WORKER_PARALLEL_GRADIENT_REDUCTION_H_
#define VRAMLAB_WORKER_PARALLEL_GRADIENT_REDUCTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "worker/model/qwen2_model.h"
#include "worker/model/unit_hooks.h"
#include "worker/parallel/rank_group.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

class GradientReduction : public ForwardUnitHooks {
 public:
  // `parameters`: the trainable parameters, distinct, in model order; `owner[i]` is the rank whose
  // optimizer steps parameters[i] (every entry this rank for SHARD_NONE). `sharding` is
  // SHARD_NONE, SHARD_OPTIMIZER or SHARD_GRADIENTS. Installs itself as the model's unit hooks
  // (replacing none: the model must have none); `group` outlives this object, and the model's
  // Qwen2Model is kept alive until it is destroyed.
  GradientReduction(RankGroup* group, Qwen2ForCausalLMImpl& model,
                    std::vector<torch::Tensor> parameters, std::vector<int> owner,
                    Sharding sharding);
  // Waits for any collective still pending (an exception's unwinding), then removes itself from
  // the model's hooks.
  ~GradientReduction() override;

  GradientReduction(const GradientReduction&) = delete;
  GradientReduction& operator=(const GradientReduction&) = delete;

  // Before each micro-batch's forward; `last`: the step's last micro-batch.
  void Begin(bool last);
  // After each micro-batch's loss.backward(): see the file comment.
  void Finish();

  // Collectives (one per unit with trainable parameters) issued by a hook inside backward, and
  // after it by Finish(), over this object's life: how much of the communication overlapped
  // backward.
  int units_reduced_in_backward() const { return units_reduced_in_backward_; }
  int units_reduced_after_backward() const { return units_reduced_after_backward_; }
  // SHARD_GRADIENTS: the largest total of gradients the rank let go of that collectives in flight
  // still hold (issued, not yet waited for): the others' gradients of at most two units. 0 for
  // the other shardings, whose collectives work on gradients the rank keeps. The process group's
  // own staging (Gloo's float32 copies of bfloat16) is not included.
  int64_t peak_communication_bytes() const { return peak_communication_bytes_; }

  void BeforeRoot() override;
  torch::Tensor BeforeLayer(size_t index, const torch::Tensor& input) override;
  torch::Tensor AfterLayer(size_t index, const torch::Tensor& output) override { return output; }

 private:
  struct Unit {
    std::vector<size_t> parameters;  // indices into parameters_
    bool awaiting_backward = false;  // ran forward in a synced micro-batch; not yet reduced
  };

  bool Synced() const { return sharding_ == Sharding::kShardGradients || last_; }
  // Issues the unit's collective, if it awaits one and has trainable parameters, and completes
  // the one before it; whether it issued one.
  bool Reduce(Unit& unit);
  // Waits for the collective in flight, if any.
  void FinishPending();

  RankGroup* const group_;
  const std::shared_ptr<Qwen2ModelImpl> model_;
  std::vector<torch::Tensor> parameters_;
  const std::vector<int> owner_;
  const Sharding sharding_;
  std::vector<Unit> units_;  // the layers in order, then the root
  std::unique_ptr<PendingCollective> pending_;
  int64_t pending_bytes_ = 0;  // of pending_: gradients the rank let go of
  int64_t communication_bytes_ = 0;
  int64_t peak_communication_bytes_ = 0;
  bool last_ = true;
  int units_reduced_in_backward_ = 0;
  int units_reduced_after_backward_ = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_GRADIENT_REDUCTION_H_
