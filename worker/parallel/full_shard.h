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
// hooks on the layers' inputs and outputs, with `prefetch` (FSDP2's order, the default):
//
//   forward   BeforeRoot issues the root's all-gather and layer 0's, and waits for the root's.
//             BeforeLayer(i) waits for layer i's all-gather and issues layer i+1's, so that it
//             runs while layer i computes; AfterLayer(i) frees layer i when reshard_after_forward
//             (the root stays gathered: its lm_head runs in the loss, after the model's forward).
//   backward  a hook on layer i's input runs once the layer's backward has produced every
//             gradient, its parameters' included (autograd's ready queue runs the layer's nodes,
//             and the AccumulateGrad nodes first of all, before any node of the layer below).
//             There, "post-backward" of layer i: its reduce-scatter is issued (the pending
//             collective takes its full gradients), then the previous unit's reduce-scatter is
//             waited for and added into the shard gradients, and layer i's parameters are freed.
//             Then "pre-backward" of layer i-1: its all-gather (issued one unit earlier) is waited
//             for, and layer i-2's issued. The input is layer i-1's output, so this happens before
//             layer i-1's first backward node and before a checkpointed layer's recompute. The top
//             layer's pre-backward is a hook on its output.
//   FinishBackward, after loss.backward(): post-backward of every unit whose input hook did not
//             run (an input that needs no gradient, e.g. layer 0's under LoRA) and of the root,
//             then the last reduce-scatter is waited for.
//
// So the compute of a unit overlaps the all-gather of the next one and, in backward, the
// reduce-scatter of the previous one (the top layer's gather in backward has nothing to overlap:
// it is waited for at once). With reshard_after_forward at most the root and two layers are
// gathered at once, in forward and in backward (a model of two layers: all of it); without it
// every layer stays gathered from its forward until its backward ends. At most two units'
// reduce-scatters are in flight: one issued, the previous one not yet waited for.
//
// Without `prefetch` every collective is waited for where it is issued: a unit is gathered when it
// is about to run (the root and one layer at a time with reshard_after_forward), and a unit's
// reduce-scatter completes before its post-backward returns, one at a time.
//
// Memory contract of the collectives (rank_group.h, PendingCollective): a pending all-gather
// writes a unit's gathered storage, so a unit is freed (Reshard) only after its all-gather has
// been waited for; a pending reduce-scatter holds the gradients and chunks it uses, so the
// parameters drop their full gradients when it is issued. On NCCL, Wait() orders the current
// stream after the collective, and what is freed after it is freed in that stream's order.
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

#include "common/layout/shard_layout.h"
#include "common/spec/parallel_rules.h"
#include "worker/model/qwen2_model.h"
#include "worker/model/unit_hooks.h"
#include "worker/parallel/rank_group.h"

namespace vramlab::worker {

// parallel.reshard_after_forward and parallel.prefetch (docs/PARALLEL.md, "The spec").
struct FullShardOptions {
  bool reshard_after_forward = false;
  bool prefetch = spec_rules::kDefaultPrefetch;
};

class FullShard : public ForwardUnitHooks {
 public:
  // Shards `model`'s parameters and NF4 storage buffers (each must be contiguous at storage
  // offset 0; a tied parameter is sharded once; a tensor of no elements has nothing to gather)
  // and installs itself as the model's unit hooks. The rank's shards are made on `device` and
  // copied out of the full values, and each full parameter's storage is freed as soon as its
  // shard exists. A full parameter on another device (a model built on the host) is moved to
  // `device` without its values: its TensorImpl takes a storage there, empty until gathered. So
  // LOAD's peak on `device` is the full model plus one shard when the model was built there, and
  // the shards alone when it was built on the host. `group` outlives this object; the model's
  // Qwen2Model is kept alive until it is destroyed, so it never calls a destroyed hook. Throws
  // std::invalid_argument for a parameter that is not contiguous at offset 0.
  FullShard(RankGroup* group, Qwen2ForCausalLMImpl& model, FullShardOptions options,
            const torch::Device& device);
  // Waits for any collective still pending (an exception's unwinding), then removes itself from
  // the model's hooks.
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
  // forward and was not yet finished (the root last) and waits for every pending collective;
  // `last`: the step's last micro-batch, after which each shard gradient is the mean over the
  // ranks.
  void FinishBackward(bool last);
  // Drops every shard's gradient.
  void ZeroGrad();
  // Every parameter's full value (not the NF4 buffers'), as a host tensor of its own, under its
  // model name in model order; gathered unit by unit and resharded again. A collective: every rank
  // calls it.
  std::vector<std::pair<std::string, torch::Tensor>> GatherToHost();

  // The largest total of gathered full parameters and NF4 buffers alive at once (bytes of their
  // padded storage), counted from the moment the storage is materialised for its all-gather.
  int64_t peak_gathered_bytes() const { return peak_gathered_bytes_; }
  // The largest total of buffers held by reduce-scatters in flight at once (issued, not yet
  // waited for): each input, i.e. the full gradient handed over or, where its rows do not divide
  // by the world size (or a rank has no gradient), its zero-padded copy; and each received chunk
  // that is added to an accumulating shard gradient (a later micro-batch's). The first
  // micro-batch's chunks become the shard gradients and are not counted. The process group's own
  // staging (Gloo's flat all-gather output, its float32 copies of bfloat16) is not included.
  int64_t peak_communication_bytes() const { return peak_communication_bytes_; }

  void BeforeRoot() override;
  torch::Tensor BeforeLayer(size_t index, const torch::Tensor& input) override;
  torch::Tensor AfterLayer(size_t index, const torch::Tensor& output) override;

 private:
  struct ShardedParameter {
    std::string name;
    torch::Tensor full;   // the model's parameter or NF4 buffer
    torch::Tensor shard;  // leaf of ChunkShape(); requires_grad as `full`
    layout::ShardLayout layout;
    int64_t gathered_bytes;  // of the padded storage while gathered
    bool buffer;             // an NF4 storage buffer, not a parameter
  };
  struct Unit {
    std::vector<size_t> parameters;  // indices into parameters_ (NF4 buffers included)
    bool gathered = false;           // storage materialised (its all-gather may still be pending)
    std::unique_ptr<PendingCollective> gathering;  // the all-gather not yet waited for
    bool awaiting_backward = false;  // ran forward with autograd; gradients not yet reduced
  };
  // A unit's reduce-scatter in flight: chunk i is parameters_[reduced[i]]'s.
  struct Reduction {
    std::unique_ptr<PendingCollective> collective;
    std::vector<size_t> reduced;
    std::vector<torch::Tensor> chunks;
    int64_t bytes = 0;  // counted in communication_bytes_ until it is waited for
  };

  // Copies the rank's chunk out of `full`, frees `full`'s storage and records it.
  void AddSharded(const std::string& name, const torch::Tensor& full, bool buffer);
  // Materialises the unit's storage and issues its all-gather, unless it is gathered.
  void StartGather(Unit& unit);
  // Waits for the unit's all-gather, if one is pending.
  void WaitGather(Unit& unit);
  void Gather(Unit& unit);
  // Frees the unit's gathered storage (after its all-gather, if pending).
  void Reshard(Unit& unit);
  // Before layer `index`'s backward: it is gathered, and with prefetch the layer below's
  // all-gather is issued.
  void PrepareBackward(size_t index);
  // The unit's post-backward: issues the reduce-scatter of its trainable gradients into their
  // shards' gradients (the parameters drop the full gradients), completes the previous one (with
  // prefetch) or this one (without), and reshards the unit.
  void ReduceGradients(Unit& unit);
  // Waits for the reduce-scatter in flight, if any, and adds its chunks into the shard gradients.
  void FinishReduction();
  void AddCommunicationBytes(int64_t bytes);

  RankGroup* const group_;
  const std::shared_ptr<Qwen2ModelImpl> model_;
  const FullShardOptions options_;
  const torch::Device device_;                // of the shards and the gathered parameters
  std::vector<ShardedParameter> parameters_;  // the parameters in model order, then the NF4 buffers
  std::vector<Unit> units_;                   // the layers in order, then the root
  std::unique_ptr<Reduction> reducing_;       // with prefetch: the last reduce-scatter issued
  int64_t gathered_bytes_ = 0;
  int64_t peak_gathered_bytes_ = 0;
  int64_t communication_bytes_ = 0;
  int64_t peak_communication_bytes_ = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_FULL_SHARD_H_
