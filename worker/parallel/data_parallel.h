// One rank's side of data-parallel training (docs/PARALLEL.md). The training loop calls it
// at fixed points of every step, and every rank makes the same calls in the same order:
//
//   AttachModel(model, device)                (once, after the model is loaded)
//   MakeRankOptimizer(...)
//   LocalRows(global micro-batch)  -> this rank's rows
//   BeginMicroBatch(last), forward, backward, AfterBackward(last)    (per micro-batch)
//   optimizer->Step(), AfterStep(), ZeroGrad()
//   ParametersToSave(model, wanted)           (once, after the last step)
//   ReleaseModel()                            (before the model is destroyed)
//
// so that the run trains as one process with world_size times the micro-batch would: each rank's
// loss is the mean over its rows, and the gradients are averaged over the ranks before a step.
//
//   SHARD_NONE       the last micro-batch's backward all-reduces every gradient, a unit (decoder
//                    layer) at a time as backward finishes it (gradient_reduction.h), and
//                    AfterBackward(last) completes the rest and divides by world_size; each rank's
//                    optimizer holds and updates every parameter.
//   SHARD_OPTIMIZER  gradients as SHARD_NONE; each rank's optimizer holds only the parameters it
//                    owns (parameter_partition.h); AfterStep broadcasts each from its owner.
//   SHARD_GRADIENTS  every micro-batch's backward reduces each gradient to its owner (sum), a
//                    unit at a time as for SHARD_NONE, and the other ranks free it once its
//                    reduce completes; the owner divides by world_size after the last; otherwise
//                    as SHARD_OPTIMIZER.
//   SHARD_FULL       AttachModel splits every parameter over the ranks and gathers each unit's
//                    parameters around its forward and backward (full_shard.h); each rank's
//                    optimizer steps its own shards, and nothing is broadcast after the step.
//
// Every trainable parameter is assumed to take part in every forward (true of the Qwen2 model
// and its adapters): a gradient that a rank lacks at a collective counts as zeros.
#ifndef VRAMLAB_WORKER_PARALLEL_DATA_PARALLEL_H_
#define VRAMLAB_WORKER_PARALLEL_DATA_PARALLEL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/qwen2_model.h"
#include "worker/optim/optimizer.h"
#include "worker/parallel/full_shard.h"
#include "worker/parallel/gradient_reduction.h"
#include "worker/parallel/rank_group.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

class DataParallel {
 public:
  // `group` outlives this object.
  DataParallel(RankGroup* group, const ParallelSpec& parallel);

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  // "SHARD_OPTIMIZER over 2 ranks (gloo)".
  std::string Describe() const;

  // Rows [rank * m, (rank + 1) * m) of a global micro-batch of world_size * m rows.
  torch::Tensor LocalRows(const torch::Tensor& global_batch) const;

  // SHARD_FULL: shards `model`'s parameters onto `device` (FullShard; the model may have been
  // built on the host) until ReleaseModel() or this object's end, whichever comes first. Every
  // other sharding: remembers the model (on `device`), whose backward MakeRankOptimizer's
  // GradientReduction hooks into.
  void AttachModel(Qwen2ForCausalLMImpl& model, const torch::Device& device);
  // Where the rank builds and loads its model before AttachModel: the host under SHARD_FULL
  // (whose rank then holds only its shards on `device`), except for QLoRA, which quantises onto
  // the device itself (qlora.h); `device` otherwise.
  torch::Device BuildDevice(const torch::Device& device, bool qlora) const;
  // SHARD_FULL: the sharding of the model AttachModel was given; null otherwise.
  const FullShard* full_shard() const { return full_shard_.get(); }

  // This rank's optimizer over `named_parameters` (the trainable parameters in model order, a
  // tied tensor possibly listed twice): all of them for SHARD_NONE, else the ones this rank owns;
  // for SHARD_FULL the rank's shards of them. Remembers the parameters for the calls below and,
  // but for SHARD_FULL, hooks their collectives into the attached model's backward. Throws as
  // MakeOptimizer, and std::logic_error without AttachModel first.
  std::unique_ptr<Optimizer> MakeRankOptimizer(
      const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters,
      const OptimizerOptions& options);

  // Before each micro-batch's forward; `last`: the step's last one.
  void BeginMicroBatch(bool last);
  // After each micro-batch's backward; `last`: the step's last one, after which every gradient
  // the rank's optimizer reads is the mean over the ranks.
  void AfterBackward(bool last);
  // The gradient collectives of the other shardings; null for SHARD_FULL and before
  // MakeRankOptimizer.
  const GradientReduction* gradient_reduction() const { return gradient_reduction_.get(); }
  // After the optimizer's step: every rank holds every updated parameter.
  void AfterStep();
  // Drops every trainable parameter's gradient, including those the rank's optimizer does not hold.
  void ZeroGrad();
  // The mean over ranks of a per-rank value (the step's loss).
  double MeanOverRanks(double value) { return group_->MeanOverRanks(value); }
  // The model's full parameters under their names, for --save-parameters; `wanted`: this rank
  // writes them. SHARD_FULL gathers them unit by unit into host copies when any rank wants them
  // (agreed through one all-reduce, so every rank must call this); otherwise the parameters
  // themselves (empty when not wanted).
  std::vector<std::pair<std::string, torch::Tensor>> ParametersToSave(Qwen2ForCausalLMImpl& model,
                                                                      bool wanted);
  // Forgets the model AttachModel was given (SHARD_FULL frees the shards it holds).
  void ReleaseModel();

 private:
  RankGroup* const group_;
  const Sharding sharding_;
  const FullShardOptions full_shard_options_;
  std::unique_ptr<FullShard> full_shard_;
  Qwen2ForCausalLMImpl* model_ = nullptr;  // attached, but for SHARD_FULL; until ReleaseModel
  std::unique_ptr<GradientReduction> gradient_reduction_;
  std::vector<torch::Tensor> parameters_;  // distinct, in model order
  std::vector<int> owner_;                 // per parameter; all this rank for SHARD_NONE
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_DATA_PARALLEL_H_
