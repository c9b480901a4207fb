#include "worker/parallel/data_parallel.h"

#include <stdexcept>
#include <unordered_set>

#include "common/layout/parameter_partition.h"

namespace vramlab::worker {
namespace {

// The optimizer of a rank that owns no parameter (more ranks than parameters).
class NoParametersOptimizer : public Optimizer {
 public:
  void Step() override {}
  void ZeroGrad() override {}
  int64_t DeviceStateBytes() const override { return 0; }
  int64_t HostStateBytes() const override { return 0; }
  std::string Describe() const override { return "none (this rank owns no parameter)"; }
};

std::string ShardingName(Sharding sharding) {
  const char* name = plain::EnumName(sharding);
  return name != nullptr ? name : std::to_string(static_cast<int>(sharding));
}

}  // namespace

DataParallel::DataParallel(RankGroup* group, const ParallelSpec& parallel)
    : group_(group),
      sharding_(parallel.sharding),
      full_shard_options_{parallel.reshard_after_forward, parallel.prefetch} {}

std::string DataParallel::Describe() const {
  std::string text = ShardingName(sharding_) + " over " + std::to_string(world_size()) +
                     " ranks (" + group_->backend_name() + ")";
  if (sharding_ == Sharding::kShardFull) {
    text += full_shard_options_.reshard_after_forward ? ", resharded after forward"
                                                      : ", not resharded after forward";
    text += full_shard_options_.prefetch ? ", prefetching the next unit" : ", no prefetch";
  }
  return text;
}

void DataParallel::AttachModel(Qwen2ForCausalLMImpl& model, const torch::Device& device) {
  if (sharding_ != Sharding::kShardFull) {
    model_ = &model;
    return;
  }
  full_shard_ = std::make_unique<FullShard>(group_, model, full_shard_options_, device);
}

torch::Device DataParallel::BuildDevice(const torch::Device& device, bool qlora) const {
  return sharding_ == Sharding::kShardFull && !qlora ? torch::Device(torch::kCPU) : device;
}

void DataParallel::ReleaseModel() {
  gradient_reduction_.reset();
  full_shard_.reset();
  model_ = nullptr;
}

torch::Tensor DataParallel::LocalRows(const torch::Tensor& global_batch) const {
  const int64_t rows = global_batch.size(0) / world_size();
  return global_batch.narrow(0, rank() * rows, rows);
}

std::unique_ptr<Optimizer> DataParallel::MakeRankOptimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters,
    const OptimizerOptions& options) {
  parameters_.clear();
  if (sharding_ == Sharding::kShardFull) {
    if (!full_shard_)
      throw std::logic_error("DataParallel: SHARD_FULL's optimizer needs AttachModel first");
    std::vector<std::pair<std::string, torch::Tensor>> shards = full_shard_->TrainableShards();
    if (shards.empty()) return std::make_unique<NoParametersOptimizer>();
    return MakeOptimizer(std::move(shards), options);
  }
  std::vector<std::string> names;
  std::unordered_set<const void*> seen;
  for (const auto& [name, p] : named_parameters) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;  // a tied tensor's second name
    parameters_.push_back(p);
    names.push_back(name);
  }
  if (sharding_ == Sharding::kShardNone) {
    owner_.assign(parameters_.size(), rank());
  } else {
    std::vector<int64_t> numels;
    for (const torch::Tensor& p : parameters_) numels.push_back(p.numel());
    owner_ = layout::PartitionParameters(numels, world_size());
  }
  std::vector<std::pair<std::string, torch::Tensor>> owned;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (owner_[i] == rank()) owned.emplace_back(names[i], parameters_[i]);
  }
  if (model_ == nullptr)
    throw std::logic_error("DataParallel: the optimizer needs AttachModel first");
  gradient_reduction_.reset();  // one model's hooks at a time
  gradient_reduction_ =
      std::make_unique<GradientReduction>(group_, *model_, parameters_, owner_, sharding_);
  if (owned.empty()) return std::make_unique<NoParametersOptimizer>();
  return MakeOptimizer(std::move(owned), options);
}

void DataParallel::BeginMicroBatch(bool last) {
  if (gradient_reduction_) gradient_reduction_->Begin(last);
}

void DataParallel::AfterBackward(bool last) {
  if (sharding_ == Sharding::kShardFull) {
    full_shard_->FinishBackward(last);
    return;
  }
  // Summed into the owner in every micro-batch under SHARD_GRADIENTS: the owner's gradient
  // carries the sum so far into the next backward, which adds to it; the others start again from
  // none. The other shardings accumulate locally until the last.
  if (gradient_reduction_) gradient_reduction_->Finish();
}

void DataParallel::AfterStep() {
  // SHARD_NONE: every rank stepped every parameter alike; SHARD_FULL: the next forward gathers
  // the stepped shards.
  if (sharding_ == Sharding::kShardNone || sharding_ == Sharding::kShardFull) return;
  torch::NoGradGuard no_grad;
  std::vector<RootedTensor> updated;
  for (size_t i = 0; i < parameters_.size(); ++i)
    updated.emplace_back(parameters_[i].detach(), owner_[i]);
  group_->Broadcast(updated);
}

void DataParallel::ZeroGrad() {
  if (full_shard_) full_shard_->ZeroGrad();
  for (torch::Tensor& p : parameters_) p.mutable_grad().reset();
}

std::vector<std::pair<std::string, torch::Tensor>> DataParallel::ParametersToSave(
    Qwen2ForCausalLMImpl& model, bool wanted) {
  if (full_shard_) {
    const bool anyone_wants = group_->MeanOverRanks(wanted ? 1.0 : 0.0) > 0;
    if (!anyone_wants) return {};
    std::vector<std::pair<std::string, torch::Tensor>> gathered = full_shard_->GatherToHost();
    if (!wanted) return {};
    return gathered;
  }
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  if (!wanted) return tensors;
  for (const auto& named : model.named_parameters())
    tensors.emplace_back(named.key(), named.value().detach());
  return tensors;
}

}  // namespace vramlab::worker
