// SHARD_FULL (ZeRO-3; PyTorch FSDP2's fully_shard) for the Qwen2 model: every parameter, trainable
// or frozen, is split along dim 0 over the ranks (shard_layout.h), and only the units that run
// hold their full parameters.
//
// QLoRA: a quantised projection's NF4 storage buffers (qlora.h: packed codes, absmax codes,
// absmax scales) are sharded, gathered and freed with the unit's parameters, as frozen tensors
// (no gradient; only all-gathered). Each buffer is 1-D, so it is split in equal runs of
// ceil(elements / world_size) bytes or scales with no regard to the 64-element NF4 blocks or the
// 256-code absmax blocks: a shard boundary may cut a block, which is harmless because nothing
// decodes a shard; the matmul reads the whole gathered buffer. The per-tensor absmax offset (a
// host double) and the model's shared lookup tables (Nf4Tables) stay whole on every rank.
//
// Units: one per decoder layer and the root (every parameter outside the layers: embeddings,
// final norm, lm_head). Per micro-batch, through the model's unit hooks (unit_hooks.h) and tensor
// hooks on the layers' inputs and outputs:
//
//   forward   BeforeRoot / BeforeLayer(i): all-gather the unit's parameters if they are not
//             gathered. AfterLayer(i): free them when reshard_after_forward (the root stays
//             gathered: its lm_head runs in the loss, after the model's forward).
//   backward  a hook on layer i's input (it runs once the layer's backward has produced every
//             gradient, its parameters' included: autograd's ready queue runs the layer's nodes,
//             and the AccumulateGrad nodes first of all, before any node of the layer below)
//             reduce-scatters the layer's gradients and frees its full gradients and parameters,
//             then gathers layer i-1 again if it was freed: the input is layer i-1's output, so
//             this happens before layer i-1's first backward node and before a checkpointed
//             layer's recompute. The top layer gets the same gather from a hook on its output.
//             Nothing is prefetched: with reshard_after_forward at most the root and one layer
//             are gathered at once, in forward and in backward.
//   FinishBackward, after loss.backward(): the same for the root and for every unit whose
//             input hook did not run (an input that needs no gradient, e.g. layer 0's under LoRA).
//
// The full parameter tensors stay the model's own objects (shape, strides, autograd identity);
// only their storage is freed (StorageImpl with nbytes 0 and no data) and materialised again from
// the storage's own allocator when gathered. Tensors that autograd saved keep pointing at the same
// StorageImpl and version counter, so they read the gathered values again in backward. A full
// parameter's storage holds the padded tensor (padded_elements), of which the parameter views the
// first rows; outside a unit's forward and backward it must not be read.
//
// Each shard is a leaf tensor of the chunk's shape (ShardLayout::ChunkShape) that the optimizer
// steps; its gradient is the sum over ranks (and over the step's micro-batches) of the full
// gradient's rows it owns, divided by the world size after the step's last micro-batch. Padding
// rows have zero values and zero gradients, which every optimizer leaves at zero.
//
// Every rank makes the same collectives in the same order because every rank runs the same graph.
// Not thread-safe; the hooks run on autograd's thread while the training thread waits in backward.
#ifndef VRAMLAB_WORKER_PARALLEL_FULL_SHARD_H_
#define VRAMLAB_WORKER_PARALLEL_FULL_SHARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/qwen2_model.h"
#include "worker/model/unit_hooks.h"
#include "worker/parallel/rank_group.h"
#include "worker/parallel/shard_layout.h"

namespace vramlab::worker {

class FullShard : public ForwardUnitHooks {
 public:
  // Shards `model`'s parameters and NF4 storage buffers (each must be contiguous at storage
  // offset 0; a tied parameter is sharded once; a tensor of no elements has nothing to gather) and installs itself as the model's unit hooks. The rank's shards are copied
  // out of the full values and each full parameter's storage is freed as soon as its shard
  // exists, so the peak is the full model plus one shard. `group` outlives this object; the
  // model's Qwen2Model is kept alive until it is destroyed, so it never calls a destroyed hook.
  // Throws std::invalid_argument for a parameter that is not contiguous at offset 0.
  FullShard(RankGroup* group, Qwen2ForCausalLMImpl& model, bool reshard_after_forward);
  // Removes itself from the model's hooks.
  ~FullShard() override;

  FullShard(const FullShard&) = delete;
  FullShard& operator=(const FullShard&) = delete;

  // The trainable parameters' shards under their model names, in model order: what the rank's
  // optimizer steps.
  std::vector<std::pair<std::string, torch::Tensor>> TrainableShards() const;
  // Every shard, trainable and frozen, the NF4 buffers' included.
  std::vector<torch::Tensor> Shards() const;
  // The NF4 storage buffers' shards under their model buffer names, in model order.
  std::vector<std::pair<std::string, torch::Tensor>> BufferShards() const;
  // The full parameters and NF4 buffers whose storage is materialised now.
  std::vector<torch::Tensor> GatheredParameters() const;

  // After each micro-batch's loss.backward(): reduce-scatters and reshards every unit that ran
  // forward and was not yet finished (the root last); `last`: the step's last micro-batch, after
  // which each shard gradient is the mean over the ranks.
  void FinishBackward(bool last);
  // Drops every shard's gradient.
  void ZeroGrad();
  // Every parameter's full value (not the NF4 buffers'), as a host tensor of its own, under its
  // model name in model order; gathered unit by unit and resharded again. A collective: every rank calls it.
  std::vector<std::pair<std::string, torch::Tensor>> GatherToHost();

  // The largest total of gathered full parameters and NF4 buffers alive at once (bytes of their
  // padded storage).
  int64_t peak_gathered_bytes() const { return peak_gathered_bytes_; }
  // The largest total of staging buffers this object allocated for its collectives at once: the
  // padded copies of gradients whose rows do not divide by the world size, and the received
  // chunks that are added to an accumulating shard gradient. The process group's own staging
  // (Gloo's flat all-gather output, its float32 copies of bfloat16) is not included.
  int64_t peak_communication_bytes() const { return peak_communication_bytes_; }

  void BeforeRoot() override;
  torch::Tensor BeforeLayer(size_t index, const torch::Tensor& input) override;
  torch::Tensor AfterLayer(size_t index, const torch::Tensor& output) override;

 private:
  struct ShardedParameter {
    std::string name;
    torch::Tensor full;   // the model's parameter or NF4 buffer
    torch::Tensor shard;  // leaf of ChunkShape(); requires_grad as `full`
    ShardLayout layout;
    int64_t gathered_bytes;  // of the padded storage while gathered
    bool buffer;             // an NF4 storage buffer, not a parameter
  };
  struct Unit {
    std::vector<size_t> parameters;  // indices into parameters_ (NF4 buffers included)
    bool gathered = false;
    bool awaiting_backward = false;  // ran forward with autograd; gradients not yet reduced
  };

  // Copies the rank's chunk out of `full`, frees `full`'s storage and records it.
  void AddSharded(const std::string& name, const torch::Tensor& full, bool buffer);
  void Gather(Unit& unit);
  void Reshard(Unit& unit);
  // Reduce-scatters the unit's trainable gradients into their shards' gradients, drops the full
  // gradients and reshards.
  void ReduceGradients(Unit& unit);
  void AddCommunicationBytes(int64_t bytes);

  RankGroup* const group_;
  const std::shared_ptr<Qwen2ModelImpl> model_;
  const bool reshard_after_forward_;
  std::vector<ShardedParameter> parameters_;  // the parameters in model order, then the NF4 buffers
  std::vector<Unit> units_;                   // the layers in order, then the root
  int64_t gathered_bytes_ = 0;
  int64_t peak_gathered_bytes_ = 0;
  int64_t communication_bytes_ = 0;
  int64_t peak_communication_bytes_ = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_FULL_SHARD_H_
