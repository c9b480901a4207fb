#include "worker/parallel/full_shard.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include <c10/core/StorageImpl.h>

#include "worker/adapters/qlora.h"

namespace vramlab::worker {
namespace {

// The parameter's storage gets `nbytes` of fresh memory from the allocator it was created with.
// The TensorImpl, its version counter and every view keep pointing at the same StorageImpl.
void MaterializeShardStorage(const torch::Tensor& parameter, int64_t nbytes) {
  c10::StorageImpl* storage = parameter.storage().unsafeGetStorageImpl();
  c10::Allocator* allocator = storage->allocator();
  if (allocator == nullptr) throw std::logic_error("SHARD_FULL: a parameter's storage has no allocator");
  storage->set_data_ptr_noswap(allocator->allocate(static_cast<size_t>(nbytes)));
  storage->set_nbytes(static_cast<size_t>(nbytes));
}

// Frees the parameter's storage (its DataPtr's deleter returns it to the allocator).
void FreeShardStorage(const torch::Tensor& parameter) {
  c10::StorageImpl* storage = parameter.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, parameter.device()));
  storage->set_nbytes(size_t{0});
}

// A 1-D view of the first `elements` of the parameter's storage.
torch::Tensor FlatStorageView(const torch::Tensor& parameter, int64_t elements) {
  torch::Tensor flat = torch::empty({0}, parameter.options());
  flat.set_(parameter.storage(), 0, {elements}, {1});
  return flat;
}

// The parameter as rows (a 0-dim parameter as one row).
torch::Tensor AsRows(const torch::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

}  // namespace

FullShard::FullShard(RankGroup* group, Qwen2ForCausalLMImpl& model, bool reshard_after_forward)
    : group_(group), model_(model.model.ptr()), reshard_after_forward_(reshard_after_forward) {
  torch::NoGradGuard no_grad;
  std::unordered_map<const void*, size_t> index_of;  // TensorImpl -> parameters_ index
  for (const auto& named : model.named_parameters()) {
    const torch::Tensor& full = named.value();
    if (index_of.count(full.unsafeGetTensorImpl()) != 0) continue;  // a tied tensor's second name
    index_of[full.unsafeGetTensorImpl()] = parameters_.size();
    AddSharded(named.key(), full, /*buffer=*/false);
  }
  for (const auto& named : model.named_buffers()) {
    if (!IsNf4StorageBuffer(named.key())) continue;
    index_of[named.value().unsafeGetTensorImpl()] = parameters_.size();
    AddSharded(named.key(), named.value(), /*buffer=*/true);
  }
  std::vector<bool> in_layer(parameters_.size(), false);
  for (const Qwen2DecoderLayer& layer : model_->decoder_layers()) {
    Unit unit;
    std::vector<torch::Tensor> tensors = layer->parameters();
    for (const torch::Tensor& b : layer->buffers()) tensors.push_back(b);
    for (const torch::Tensor& t : tensors) {
      const auto found = index_of.find(t.unsafeGetTensorImpl());
      if (found == index_of.end() || in_layer[found->second]) continue;  // not sharded, or seen
      in_layer[found->second] = true;
      unit.parameters.push_back(found->second);
    }
    units_.push_back(std::move(unit));
  }
  Unit root;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!in_layer[i]) root.parameters.push_back(i);
  }
  units_.push_back(std::move(root));
  model_->set_unit_hooks(this);
}

void FullShard::AddSharded(const std::string& name, const torch::Tensor& full, bool buffer) {
  if (!full.is_contiguous() || full.storage_offset() != 0) {
    throw std::invalid_argument("SHARD_FULL: tensor " + name + " is not contiguous at offset 0");
  }
  ShardLayout layout(full.sizes().vec(), group_->world_size());
  torch::Tensor shard = torch::zeros(layout.ChunkShape(), full.options());
  const RowRange owned = layout.OwnedRows(group_->rank());
  if (owned.size() > 0) shard.narrow(0, 0, owned.size()).copy_(AsRows(full).narrow(0, owned.begin, owned.size()));
  shard.set_requires_grad(full.requires_grad());
  FreeShardStorage(full);
  const int64_t gathered_bytes = layout.padded_elements() * static_cast<int64_t>(full.element_size());
  parameters_.push_back({name, full, shard, layout, gathered_bytes, buffer});
}

FullShard::~FullShard() { model_->set_unit_hooks(nullptr); }

std::vector<std::pair<std::string, torch::Tensor>> FullShard::TrainableShards() const {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const ShardedParameter& p : parameters_) {
    if (p.shard.requires_grad()) named.emplace_back(p.name, p.shard);
  }
  return named;
}

std::vector<torch::Tensor> FullShard::Shards() const {
  std::vector<torch::Tensor> shards;
  for (const ShardedParameter& p : parameters_) shards.push_back(p.shard);
  return shards;
}

std::vector<std::pair<std::string, torch::Tensor>> FullShard::BufferShards() const {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const ShardedParameter& p : parameters_) {
    if (p.buffer) named.emplace_back(p.name, p.shard);
  }
  return named;
}

std::vector<torch::Tensor> FullShard::GatheredParameters() const {
  std::vector<torch::Tensor> gathered;
  for (const Unit& unit : units_) {
    if (!unit.gathered) continue;
    for (size_t index : unit.parameters) gathered.push_back(parameters_[index].full);
  }
  return gathered;
}

void FullShard::Gather(Unit& unit) {
  if (unit.gathered) return;
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> full_and_chunk;
  for (size_t index : unit.parameters) {
    ShardedParameter& p = parameters_[index];
    if (p.gathered_bytes == 0) continue;  // nothing to gather (an emptied QLoRA base weight)
    MaterializeShardStorage(p.full, p.gathered_bytes);
    full_and_chunk.emplace_back(FlatStorageView(p.full, p.layout.padded_elements()), p.shard);
    gathered_bytes_ += p.gathered_bytes;
  }
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
  if (!full_and_chunk.empty()) group_->AllGather(full_and_chunk);
  unit.gathered = true;
}

void FullShard::Reshard(Unit& unit) {
  if (!unit.gathered) return;
  for (size_t index : unit.parameters) {
    if (parameters_[index].gathered_bytes == 0) continue;
    FreeShardStorage(parameters_[index].full);
    gathered_bytes_ -= parameters_[index].gathered_bytes;
  }
  unit.gathered = false;
}

void FullShard::AddCommunicationBytes(int64_t bytes) {
  communication_bytes_ += bytes;
  peak_communication_bytes_ = std::max(peak_communication_bytes_, communication_bytes_);
}

void FullShard::ReduceGradients(Unit& unit) {
  if (!unit.awaiting_backward) return;
  unit.awaiting_backward = false;
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> full_and_chunk;
  std::vector<size_t> reduced;
  int64_t staging_bytes = 0;
  for (size_t index : unit.parameters) {
    ShardedParameter& p = parameters_[index];
    if (!p.shard.requires_grad()) continue;
    const torch::Tensor grad = p.full.grad();
    const int64_t padded = p.layout.padded_elements();
    torch::Tensor full;
    if (grad.defined() && grad.is_contiguous() && padded == grad.numel()) {
      full = grad.view({-1});  // the gradient itself; Gloo all-reduces it in place
    } else {
      // A parameter that got no gradient on this rank contributes zeros: every rank must join.
      full = torch::zeros({padded}, p.shard.options());
      if (grad.defined()) full.narrow(0, 0, grad.numel()).copy_(grad.reshape({-1}));
      staging_bytes += full.nbytes();
    }
    // The first micro-batch's chunk becomes the shard's gradient; later ones are added to it.
    torch::Tensor chunk = torch::empty_like(p.shard);
    if (p.shard.grad().defined()) staging_bytes += chunk.nbytes();
    full_and_chunk.emplace_back(full, chunk);
    reduced.push_back(index);
  }
  AddCommunicationBytes(staging_bytes);
  if (!full_and_chunk.empty()) group_->ReduceScatterSum(full_and_chunk);
  for (size_t i = 0; i < reduced.size(); ++i) {
    ShardedParameter& p = parameters_[reduced[i]];
    torch::Tensor& shard_grad = p.shard.mutable_grad();
    if (shard_grad.defined()) {
      shard_grad.add_(full_and_chunk[i].second);
    } else {
      shard_grad = full_and_chunk[i].second;
    }
    p.full.mutable_grad().reset();
  }
  full_and_chunk.clear();
  communication_bytes_ -= staging_bytes;
  Reshard(unit);
}

void FullShard::FinishBackward(bool last) {
  // The layers from the top down, then the root: the order autograd would have finished them.
  for (size_t i = units_.size() - 1; i-- > 0;) ReduceGradients(units_[i]);
  ReduceGradients(units_.back());
  for (Unit& unit : units_) Reshard(unit);  // a unit that ran without autograd
  if (!last) return;
  torch::NoGradGuard no_grad;
  const double scale = 1.0 / group_->world_size();
  for (ShardedParameter& p : parameters_) {
    if (p.shard.grad().defined()) p.shard.mutable_grad().mul_(scale);
  }
}

void FullShard::ZeroGrad() {
  for (ShardedParameter& p : parameters_) p.shard.mutable_grad().reset();
}

std::vector<std::pair<std::string, torch::Tensor>> FullShard::GatherToHost() {
  std::vector<torch::Tensor> host(parameters_.size());
  for (Unit& unit : units_) {
    const bool was_gathered = unit.gathered;
    Gather(unit);
    for (size_t index : unit.parameters) {
      if (parameters_[index].buffer) continue;
      host[index] = parameters_[index].full.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
    }
    if (!was_gathered) Reshard(unit);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].buffer) named.emplace_back(parameters_[i].name, host[i]);
  }
  return named;
}

void FullShard::BeforeRoot() {
  Unit& root = units_.back();
  Gather(root);
  if (torch::GradMode::is_enabled()) root.awaiting_backward = true;
}

torch::Tensor FullShard::BeforeLayer(size_t index, const torch::Tensor& input) {
  Unit& unit = units_.at(index);
  Gather(unit);
  if (!torch::GradMode::is_enabled()) return input;
  unit.awaiting_backward = true;
  if (input.requires_grad()) {
    // Runs once the gradient of the layer's input is complete, i.e. the layer's backward is done,
    // and before the node that produced the input: the layer below's last one (or the
    // embedding's). So one hook finishes this layer and then gathers the one below: with
    // reshard_after_forward one layer (and the root) is gathered at a time in backward too.
    input.register_hook([this, index](const torch::Tensor&) {
      ReduceGradients(units_[index]);
      if (index > 0) Gather(units_[index - 1]);
    });
  }
  return input;
}

torch::Tensor FullShard::AfterLayer(size_t index, const torch::Tensor& output) {
  Unit& unit = units_.at(index);
  const bool top_layer = index + 2 == units_.size();
  if (top_layer && torch::GradMode::is_enabled() && output.requires_grad()) {
    // Runs before the layer's first backward node (or a checkpointed layer's recompute). Every
    // lower layer's output is the next layer's input, whose hook (BeforeLayer) gathers it.
    output.register_hook([this, index](const torch::Tensor&) { Gather(units_[index]); });
  }
  if (reshard_after_forward_) Reshard(unit);
  return output;
}

}  // namespace vramlab::worker
