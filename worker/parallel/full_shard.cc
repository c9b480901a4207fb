#include "worker/parallel/full_shard.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include <c10/core/StorageImpl.h>

#include "worker/adapters/qlora.h"
#include "worker/parallel/model_units.h"

namespace vramlab::worker {
namespace {

// The parameter's storage gets `nbytes` of fresh memory from the allocator it was created with.
// The TensorImpl, its version counter and every view keep pointing at the same StorageImpl.
void MaterializeShardStorage(const torch::Tensor& parameter, int64_t nbytes) {
  c10::StorageImpl* storage = parameter.storage().unsafeGetStorageImpl();
  c10::Allocator* allocator = storage->allocator();
  if (allocator == nullptr)
    throw std::logic_error("SHARD_FULL: a parameter's storage has no allocator");
  storage->set_data_ptr_noswap(allocator->allocate(static_cast<size_t>(nbytes)));
  storage->set_nbytes(static_cast<size_t>(nbytes));
}

// Frees the parameter's storage (its DataPtr's deleter returns it to the allocator).
void FreeShardStorage(const torch::Tensor& parameter) {
  c10::StorageImpl* storage = parameter.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, parameter.device()));
  storage->set_nbytes(size_t{0});
}

// The tensor's TensorImpl (autograd identity, module registration, tied names) takes an empty
// storage on `device` from that device's allocator, keeping its sizes and strides; its values on
// the old device are released with their storage.
void MoveWithoutValues(const torch::Tensor& tensor, const torch::Device& device) {
  torch::Tensor empty = torch::empty({0}, tensor.options().device(device));
  empty.unsafeGetTensorImpl()->set_sizes_contiguous(tensor.sizes());
  tensor.set_data(empty);
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

FullShard::FullShard(RankGroup* group, Qwen2ForCausalLMImpl& model, FullShardOptions options,
                     const torch::Device& device)
    : group_(group), model_(model.model.ptr()), options_(options), device_(device) {
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
  for (std::vector<size_t>& indices : ModelUnits(*model_, index_of, parameters_.size())) {
    Unit unit;
    unit.parameters = std::move(indices);
    units_.push_back(std::move(unit));
  }
  model_->set_unit_hooks(this);
}

void FullShard::AddSharded(const std::string& name, const torch::Tensor& full, bool buffer) {
  if (!full.is_contiguous() || full.storage_offset() != 0) {
    throw std::invalid_argument("SHARD_FULL: tensor " + name + " is not contiguous at offset 0");
  }
  layout::ShardLayout layout(full.sizes().vec(), group_->world_size());
  torch::Tensor shard = torch::zeros(layout.ChunkShape(), full.options().device(device_));
  const layout::RowRange owned = layout.OwnedRows(group_->rank());
  if (owned.size() > 0)
    shard.narrow(0, 0, owned.size()).copy_(AsRows(full).narrow(0, owned.begin, owned.size()));
  shard.set_requires_grad(full.requires_grad());
  if (full.device() != device_) MoveWithoutValues(full, device_);
  FreeShardStorage(full);
  const int64_t gathered_bytes =
      layout.padded_elements() * static_cast<int64_t>(full.element_size());
  parameters_.push_back({name, full, shard, layout, gathered_bytes, buffer});
}

FullShard::~FullShard() {
  // Normally nothing is pending here (FinishBackward waits for everything). After an exception a
  // collective may still write a gathered storage or read a gradient: it is waited for (its
  // destructor drops any error) before the storage can be freed.
  reducing_.reset();
  for (Unit& unit : units_) unit.gathering.reset();
  model_->set_unit_hooks(nullptr);
}

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

void FullShard::StartGather(Unit& unit) {
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
  if (!full_and_chunk.empty()) unit.gathering = group_->StartAllGather(full_and_chunk);
  unit.gathered = true;
}

void FullShard::WaitGather(Unit& unit) {
  if (!unit.gathering) return;
  unit.gathering->Wait();
  unit.gathering.reset();
}

void FullShard::Gather(Unit& unit) {
  StartGather(unit);
  WaitGather(unit);
}

void FullShard::Reshard(Unit& unit) {
  if (!unit.gathered) return;
  WaitGather(unit);  // a pending all-gather still writes the storage
  for (size_t index : unit.parameters) {
    if (parameters_[index].gathered_bytes == 0) continue;
    FreeShardStorage(parameters_[index].full);
    gathered_bytes_ -= parameters_[index].gathered_bytes;
  }
  unit.gathered = false;
}

void FullShard::PrepareBackward(size_t index) {
  Gather(units_[index]);
  if (options_.prefetch && index > 0) StartGather(units_[index - 1]);
}

void FullShard::AddCommunicationBytes(int64_t bytes) {
  communication_bytes_ += bytes;
  peak_communication_bytes_ = std::max(peak_communication_bytes_, communication_bytes_);
}

void FullShard::ReduceGradients(Unit& unit) {
  if (!unit.awaiting_backward) return;
  unit.awaiting_backward = false;
  torch::NoGradGuard no_grad;
  auto reduction = std::make_unique<Reduction>();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> full_and_chunk;
  for (size_t index : unit.parameters) {
    ShardedParameter& p = parameters_[index];
    if (!p.shard.requires_grad()) continue;
    const int64_t padded = p.layout.padded_elements();
    torch::Tensor full;
    {
      const torch::Tensor grad = p.full.grad();
      if (grad.defined() && grad.is_contiguous() && padded == grad.numel()) {
        full = grad.view({-1});  // the gradient itself; Gloo all-reduces it in place
      } else {
        // A parameter that got no gradient on this rank contributes zeros: every rank must join.
        full = torch::zeros({padded}, p.shard.options());
        if (grad.defined()) full.narrow(0, 0, grad.numel()).copy_(grad.reshape({-1}));
      }
    }
    // The collective holds the gradient (or its copy) from here on; the parameter lets go of it.
    p.full.mutable_grad().reset();
    // The first micro-batch's chunk becomes the shard's gradient; later ones are added to it.
    torch::Tensor chunk = torch::empty_like(p.shard);
    reduction->bytes += full.nbytes() + (p.shard.grad().defined() ? chunk.nbytes() : 0);
    full_and_chunk.emplace_back(full, chunk);
    reduction->reduced.push_back(index);
    reduction->chunks.push_back(chunk);
  }
  if (!full_and_chunk.empty()) {
    AddCommunicationBytes(reduction->bytes);
    reduction->collective = group_->StartReduceScatterSum(full_and_chunk);
    // With prefetch the previous unit's completes now, while this one runs behind the next
    // unit's backward; without, this one completes at once.
    if (options_.prefetch) FinishReduction();
    reducing_ = std::move(reduction);
    if (!options_.prefetch) FinishReduction();
  }
  Reshard(unit);
}

void FullShard::FinishReduction() {
  if (!reducing_) return;
  const std::unique_ptr<Reduction> reduction = std::move(reducing_);
  reduction->collective->Wait();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < reduction->reduced.size(); ++i) {
    torch::Tensor& shard_grad = parameters_[reduction->reduced[i]].shard.mutable_grad();
    if (shard_grad.defined()) {
      shard_grad.add_(reduction->chunks[i]);
    } else {
      shard_grad = reduction->chunks[i];
    }
  }
  communication_bytes_ -= reduction->bytes;
}

void FullShard::FinishBackward(bool last) {
  // The layers from the top down, then the root: the order autograd would have finished them.
  for (size_t i = units_.size() - 1; i-- > 0;) ReduceGradients(units_[i]);
  ReduceGradients(units_.back());
  FinishReduction();
  for (Unit& unit : units_) Reshard(unit);  // a unit that ran without autograd, or prefetched
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
      host[index] =
          parameters_[index].full.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
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
  StartGather(root);
  if (options_.prefetch && units_.size() > 1) StartGather(units_.front());
  WaitGather(root);
  if (torch::GradMode::is_enabled()) root.awaiting_backward = true;
}

torch::Tensor FullShard::BeforeLayer(size_t index, const torch::Tensor& input) {
  Unit& unit = units_.at(index);
  Gather(unit);
  if (options_.prefetch && index + 2 < units_.size()) StartGather(units_[index + 1]);
  if (!torch::GradMode::is_enabled()) return input;
  unit.awaiting_backward = true;
  if (input.requires_grad()) {
    // Runs once the gradient of the layer's input is complete, i.e. the layer's backward is done,
    // and before the node that produced the input: the layer below's last one (or the
    // embedding's). So one hook finishes this layer and then prepares the one below.
    input.register_hook([this, index](const torch::Tensor&) {
      ReduceGradients(units_[index]);
      if (index > 0) PrepareBackward(index - 1);
    });
  }
  return input;
}

torch::Tensor FullShard::AfterLayer(size_t index, const torch::Tensor& output) {
  Unit& unit = units_.at(index);
  const bool top_layer = index + 2 == units_.size();
  if (top_layer && torch::GradMode::is_enabled() && output.requires_grad()) {
    // Runs before the layer's first backward node (or a checkpointed layer's recompute). Every
    // lower layer's output is the next layer's input, whose hook (BeforeLayer) prepares it.
    output.register_hook([this, index](const torch::Tensor&) { PrepareBackward(index); });
  }
  if (options_.reshard_after_forward) Reshard(unit);
  return output;
}

}  // namespace vramlab::worker
