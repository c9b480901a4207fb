#include "server/estimate/parameter_state.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "common/layout/optimizer_layout.h"
#include "common/spec/adapter_sizes.h"
#include "server/estimate/adapter_model.h"
#include "server/estimate/model_shape.h"
#include "server/estimate/parallel_buffers.h"

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kFp32 = 4;

// Optimizer state of one parameter tensor of `n` elements (UpdateRule::CreateState).
int64_t StateBytes(const RunSettings& run, int64_t n) {
  auto alloc = [&](int64_t nbytes) { return AllocatedBytes(run.device, nbytes); };
  const int64_t e = run.dtype_bytes;
  switch (run.optimizer) {
    case vramlab::v1::ADAMW:  // exp_avg, exp_avg_sq in the parameter dtype
      return 2 * alloc(n * e);
    case vramlab::v1::ADAMW_FP32_MASTER:  // fp32 master copy, fp32 exp_avg, fp32 exp_avg_sq
      return 3 * alloc(n * kFp32);
    case vramlab::v1::SGD:  // momentum buffer in the parameter dtype
      return alloc(n * e);
    case vramlab::v1::ADAMW_8BIT:
      if (!layout::AdamW8bitQuantized(n)) return 2 * alloc(n * kFp32);
      return 2 * (alloc(n) + alloc(layout::AdamW8bitBlocks(n) * kFp32));
    default:
      return 0;
  }
}

// Temporaries of updating `r` elements of one tensor of `n` elements through the rule's
// range path (UpdateRange), one range at a time.
int64_t RangeTemporaries(const RunSettings& run, int64_t n, int64_t r) {
  auto alloc = [&](int64_t nbytes) { return AllocatedBytes(run.device, nbytes); };
  const int64_t e = run.dtype_bytes;
  const bool upcast = e < kFp32;
  switch (run.optimizer) {
    case vramlab::v1::ADAMW:  // denom = exp_avg_sq.sqrt() (then divided and shifted in place)
      return alloc(r * e);
    case vramlab::v1::ADAMW_FP32_MASTER:  // the gradient upcast, then the fp32 denominator
      return (upcast ? alloc(r * kFp32) : 0) + alloc(r * kFp32);
    case vramlab::v1::SGD:  // d = grad + weight_decay * param
      return run.sgd_weight_decay ? alloc(r * e) : 0;
    case vramlab::v1::ADAMW_8BIT: {
      // fp32 copies of the parameter and gradient range (aliases in fp32), then either the
      // fp32 moments' denominator, or both moments dequantized to fp32 while one is requantized
      // (rows / scale and the searchsorted codes), with per-block absmax, scale and zero mask.
      const int64_t copies = upcast ? 2 * alloc(r * kFp32) : 0;
      if (!layout::AdamW8bitQuantized(n)) return copies + alloc(r * kFp32);
      const int64_t blocks = layout::AdamW8bitBlocks(r);
      return copies + 4 * alloc(r * kFp32) + 2 * alloc(blocks * kFp32) + alloc(blocks);
    }
    default:
      return 0;
  }
}

// Temporaries of one Step() over all parameters (worker/optim/rule_optimizer.cc): multi-tensor
// kernels on CUDA where the rule has one, ranges otherwise, nothing on a CUDA device when the
// step runs on the host (offload: staging buffers are pinned host memory).
int64_t StepTemporaries(const RunSettings& run, const std::vector<int64_t>& tensors) {
  if (run.device == Device::kCuda) {
    if (run.offload_to_cpu) return 0;
    const int64_t step_scalar = AllocatedBytes(run.device, kFp32);  // FusedAdamW's step tensor
    switch (run.optimizer) {
      case vramlab::v1::ADAMW:
        return step_scalar;
      case vramlab::v1::SGD:  // _foreach_ ops, in place
        return 0;
      case vramlab::v1::ADAMW_FP32_MASTER: {
        // Greedy groups of fp32 gradient copies up to 256 MiB; a larger tensor is its own group.
        int64_t largest_group = 0;
        for (size_t begin = 0; begin < tensors.size();) {
          int64_t group_raw_bytes = 0, group_bytes = 0;
          size_t end = begin;
          do {
            group_raw_bytes += tensors[end] * kFp32;
            group_bytes += AllocatedBytes(run.device, tensors[end] * kFp32);
            ++end;
          } while (end < tensors.size() &&
                   group_raw_bytes + tensors[end] * kFp32 <= layout::kMasterUpcastGroupBytes);
          largest_group = std::max(largest_group, group_bytes);
          begin = end;
        }
        return largest_group + step_scalar;
      }
      default:
        break;  // 8-bit: device ranges below
    }
  }
  const int64_t range_limit =
      run.device == Device::kCuda ? kDeviceUpdateRangeElements : kHostUpdateTaskElements;
  int64_t most = 0;
  for (int64_t n : tensors) {
    most = std::max(most, RangeTemporaries(run, n, std::min(n, range_limit)));
  }
  return most;
}

// Temporaries of updating one parameter from inside backward: the same paths, one tensor.
int64_t LargestSingleTensorUpdate(const RunSettings& run, const std::vector<int64_t>& tensors) {
  int64_t most = 0;
  for (int64_t n : tensors) most = std::max(most, StepTemporaries(run, {n}));
  return most;
}

// Where backward makes a trainable tensor's gradient: in decoder layer i's backward (i >= 0), or
// one of these.
constexpr int kMadeBeforeLayers = -1;  // the loss's and the final norm's backward
constexpr int kMadeInEmbedding = -2;

// SHARD_GRADIENTS: the gradients of the trainable tensors the rank does not own (`owned[i]`
// false), `bytes[i]` each, by where backward makes them (`made_in[i]`, above).
OthersGradients GradientsOfOthers(const std::vector<int64_t>& bytes, const std::vector<bool>& owned,
                                  const std::vector<int>& made_in, int64_t layers) {
  OthersGradients others;
  others.layers.assign(static_cast<size_t>(layers), 0);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (owned[i]) continue;
    others.all += bytes[i];
    if (made_in[i] == kMadeBeforeLayers) {
      others.before_layers += bytes[i];
    } else if (made_in[i] == kMadeInEmbedding) {
      others.embedding += bytes[i];
    } else {
      others.layers[static_cast<size_t>(made_in[i])] += bytes[i];
    }
  }
  return others;
}

// SHARD_FULL's LOAD as the worker runs it (worker/parallel/full_shard.h, FullShard's constructor,
// and DataParallel::BuildDevice): on CUDA every rank builds (or loads) the whole model on the host
// and copies only its shards to the device, so LOAD holds the shards alone there — except under
// QLoRA, which quantises the whole model onto the device first. There, and on the CPU (where the
// host is the device), the rank shards the whole model one parameter at a time, freeing each full
// parameter once its shard exists: LOAD's peak is the whole model plus one shard (at most the
// largest), not the shards alone; random init's copy, where counted, comes before.
void AddWholeModelLoad(const RunSettings& run, int64_t whole_weights, int64_t largest_shard,
                       ParameterState* s) {
  if (!run.parallel.shards_parameters()) return;
  if (run.device == Device::kCuda && !run.adapter.qlora) return;
  s->load_temporaries = whole_weights - s->weights + std::max(s->load_temporaries, largest_shard);
}

// What one rank holds of each adapter tensor (elements; 0: nothing), per category.
struct AdapterParts {
  std::vector<int64_t> weights, gradients, state;
  int rank = 0;  // the rank they are of
};

// The rank of a parallel run as the worker lays out the trainable adapters (docs/PARALLEL.md,
// "The shardings"): SHARD_NONE every adapter whole; SHARD_OPTIMIZER the weights and gradients
// whole and the state of the adapters the rank owns (layout::PartitionParameters over the adapters,
// the only trainable parameters); SHARD_GRADIENTS the owned adapters' gradients too (the others'
// are freed after their reduce); SHARD_FULL every adapter's dim-0 chunk in all three. Of the
// partitioned ranks the one whose owned state (and, sharding gradients, gradient) bytes are the
// largest is estimated: it is the rank whose peak is highest, the others differ only by it.
AdapterParts RankAdapterParts(const RunSettings& run, const std::vector<int64_t>& trainable,
                              const std::function<int64_t(int64_t)>& owned_bytes) {
  const ParallelSettings& par = run.parallel;
  AdapterParts parts{trainable, trainable, trainable};
  if (par.shards_parameters()) {
    for (size_t i = 0; i < trainable.size(); ++i) {
      const int64_t chunk = FullShardChunkElements(
          trainable[i], AdapterTensorRows(run, i, trainable[i]), par.world_size);
      parts.weights[i] = parts.gradients[i] = parts.state[i] = chunk;
    }
    return parts;
  }
  if (!par.shards_optimizer_state()) return parts;
  std::vector<int64_t> held;
  for (int64_t n : trainable) held.push_back(owned_bytes(n));
  const BusiestRank busiest = BusiestOwner(trainable, held, par.world_size);
  parts.rank = busiest.rank;
  for (size_t i = 0; i < trainable.size(); ++i) {
    if (busiest.owned[i]) continue;
    parts.state[i] = 0;
    if (par.shards_gradients()) parts.gradients[i] = 0;
  }
  return parts;
}

// Adapter training: the base model frozen (no gradient, no state), the optimizer over the
// adapters in their own dtype (worker/adapters/lora.h, qlora.h). SHARD_FULL shards the frozen base
// weights as it shards every parameter; under QLoRA that is each projection's NF4 buffers (codes,
// absmax codes, scales), each 1-D and split in ceil(n / N) elements (worker/parallel/full_shard.h),
// and the shared lookup tables stay whole. The other shardings keep the NF4 buffers on every rank.
ParameterState EstimateAdapterParameterState(const RunSettings& run) {
  ParameterState s;
  const std::vector<int64_t> tensors = ParameterTensorElements(run.model);
  const AdapterTensors adapters = ListAdapterTensors(run);
  const ParallelSettings& par = run.parallel;
  const std::vector<int64_t> rows = ParameterTensorRows(run.model);
  auto base_part = [&](size_t t) {
    return par.shards_parameters() ? FullShardChunkElements(tensors[t], rows[t], par.world_size)
                                   : tensors[t];
  };
  auto alloc = [&](int64_t nbytes) { return AllocatedBytes(run.device, nbytes); };
  int64_t largest_matrix = 0, whole_weights = 0, largest_shard = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t n = tensors[t];
    largest_matrix = std::max(largest_matrix, n);
    if (run.adapter.qlora && adapters.wrapped[t]) {
      const Nf4Buffers nf4 = Nf4BufferElements(n);
      auto part = [&](int64_t elements) {
        return par.shards_parameters() ? spec_rules::CeilDiv(elements, par.world_size) : elements;
      };
      s.weights += alloc(part(nf4.codes));
      s.quantization_constants += alloc(part(nf4.absmax_codes)) + alloc(4 * part(nf4.scales));
      // LOAD quantises onto the device whole before the rank keeps its shards.
      whole_weights += alloc(nf4.codes) + alloc(nf4.absmax_codes) + alloc(4 * nf4.scales);
      largest_shard = std::max(largest_shard, alloc(part(nf4.codes)));
    } else {
      s.weights += alloc(base_part(t) * run.dtype_bytes);
      whole_weights += alloc(n * run.dtype_bytes);
      largest_shard = std::max(largest_shard, alloc(base_part(t) * run.dtype_bytes));
    }
  }
  if (run.adapter.qlora) {
    // The shared lookup tables (worker/adapters/nf4.h, Nf4Tables): codebook pairs [256, 2] in
    // the compute dtype, the absmax map's 256 values and 255 midpoints in fp32.
    const int64_t tables =
        alloc(256 * 2 * run.dtype_bytes) + alloc(256 * kFp32) + alloc(255 * kFp32);
    s.quantization_constants += tables;
    whole_weights += tables;
  }
  // The optimizer's arithmetic in the adapters' dtype.
  RunSettings adapter_run = run;
  adapter_run.dtype_bytes = run.adapter.dtype_bytes;
  const bool state_on_device = !(run.offload_to_cpu && run.device == Device::kCuda);
  auto grad_bytes = [&](int64_t n) { return alloc(n * run.adapter.dtype_bytes); };
  const AdapterParts parts = RankAdapterParts(run, adapters.trainable, [&](int64_t n) {
    return StateBytes(adapter_run, n) + (par.shards_gradients() ? grad_bytes(n) : 0);
  });
  std::vector<int64_t> updated;  // what this rank's update runs over
  for (size_t i = 0; i < adapters.trainable.size(); ++i) {
    s.adapter_weights += grad_bytes(parts.weights[i]);
    whole_weights += grad_bytes(adapters.trainable[i]);
    if (parts.gradients[i] > 0) s.all_gradients += grad_bytes(parts.gradients[i]);
    if (parts.state[i] == 0) continue;
    updated.push_back(parts.state[i]);
    if (state_on_device) s.optimizer_state += StateBytes(adapter_run, parts.state[i]);
  }
  // Layer 0's adapters (the first layer_trainable.size() entries) stand for every layer's.
  // SHARD_GRADIENTS: a layer's backward makes all of its adapters' gradients, owned or not, and
  // the others' live until their layer's reduce completes (OthersGradients).
  const size_t per_layer = adapters.layer_trainable.size();
  for (size_t i = 0; i < per_layer && i < adapters.trainable.size(); ++i) {
    const int64_t made = par.partitions_gradients() ? adapters.trainable[i] : parts.gradients[i];
    s.layer_gradients += grad_bytes(made);
    if (state_on_device && parts.state[i] > 0)
      s.layer_state += StateBytes(adapter_run, parts.state[i]);
  }
  for (size_t i = 0; i < adapters.trainable.size(); ++i) {
    const int64_t made = par.partitions_gradients() ? adapters.trainable[i] : parts.gradients[i];
    s.tensor_gradients.push_back(grad_bytes(made));
    s.tensor_state.push_back(
        state_on_device && parts.state[i] > 0 ? StateBytes(adapter_run, parts.state[i]) : 0);
  }
  if (par.partitions_gradients() && per_layer > 0) {
    std::vector<int64_t> bytes;
    std::vector<bool> owned;
    std::vector<int> made_in;
    for (size_t i = 0; i < adapters.trainable.size(); ++i) {
      bytes.push_back(grad_bytes(adapters.trainable[i]));
      owned.push_back(parts.gradients[i] > 0);
      made_in.push_back(static_cast<int>(i / per_layer));
    }
    s.others_gradients = GradientsOfOthers(bytes, owned, made_in, run.model.num_layers);
  }
  s.weights += s.adapter_weights + s.quantization_constants;
  if (run.in_backward) {
    s.in_backward_update_temporaries = LargestSingleTensorUpdate(adapter_run, updated);
  } else {
    s.gradients = s.all_gradients;
    s.step_temporaries = StepTemporaries(adapter_run, updated);
  }
  if (run.device == Device::kCpu) {
    // Random init's fp32 copy of the largest matrix; QLoRA's full-precision projections exist on
    // the host (the device, here) until they are quantised.
    s.load_temporaries = alloc(largest_matrix * kFp32);
    if (run.adapter.qlora) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        if (adapters.wrapped[t]) s.load_temporaries += alloc(tensors[t] * run.dtype_bytes);
      }
    }
  }
  AddWholeModelLoad(run, whole_weights, largest_shard, &s);
  AddParallelBuffers(run, &s);
  s.reported_rank = parts.rank;
  return s;
}

}  // namespace

int64_t OthersGradients::MadeBeforeLayer(int64_t index) const {
  int64_t made = before_layers;
  for (size_t j = static_cast<size_t>(std::max<int64_t>(index + 1, 0)); j < layers.size(); ++j) {
    made += layers[j];
  }
  return made;
}

int64_t OthersGradients::ReducedBeforeLayer(int64_t index) const {
  int64_t reduced = 0;
  for (size_t j = static_cast<size_t>(std::max<int64_t>(index + 2, 0)); j < layers.size(); ++j) {
    reduced += layers[j];
  }
  return reduced;
}

int64_t OthersGradients::MostInFlight() const {
  int64_t most = before_layers + embedding + (layers.empty() ? 0 : layers[0]);
  for (size_t j = 0; j + 1 < layers.size(); ++j) most = std::max(most, layers[j] + layers[j + 1]);
  return most;
}

ParameterState EstimateParameterState(const RunSettings& run) {
  if (run.adapter.enabled()) return EstimateAdapterParameterState(run);
  ParameterState s;
  const std::vector<int64_t> tensors = ParameterTensorElements(run.model);
  auto grad_bytes = [&](int64_t n) { return AllocatedBytes(run.device, n * run.dtype_bytes); };
  // State on a CUDA device unless offloaded; on the CPU device offload changes nothing.
  const bool state_on_device = !(run.offload_to_cpu && run.device == Device::kCuda);
  // One rank's part of each tensor (elements; 0: nothing) where the sharding divides that
  // category. SHARD_FULL: the padded dim-0 chunk of every tensor (parallel_buffers.h).
  // SHARD_OPTIMIZER and SHARD_GRADIENTS: the worker's ownership (worker/parallel/data_parallel.cc,
  // MakeRankOptimizer): whole tensors, partitioned largest first over the parameters as
  // ParameterTensorElements lists them (a tied embedding once); the owner alone keeps a tensor's
  // state and, sharding gradients, its gradient after backward. The busiest owner is estimated.
  const ParallelSettings& par = run.parallel;
  const std::vector<int64_t> rows = ParameterTensorRows(run.model);
  std::vector<int64_t> shard(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    shard[t] = par.shards_parameters() ? FullShardChunkElements(tensors[t], rows[t], par.world_size)
                                       : tensors[t];
  }
  if (par.shards_optimizer_state() && !par.shards_parameters()) {
    std::vector<int64_t> owned_bytes;
    for (int64_t n : tensors) {
      owned_bytes.push_back(StateBytes(run, n) + (par.shards_gradients() ? grad_bytes(n) : 0));
    }
    const BusiestRank busiest = BusiestOwner(tensors, owned_bytes, par.world_size);
    s.reported_rank = busiest.rank;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (!busiest.owned[t]) shard[t] = 0;
    }
  }
  auto weight_part = [&](size_t t) { return par.shards_parameters() ? shard[t] : tensors[t]; };
  auto grad_part = [&](size_t t) { return par.shards_gradients() ? shard[t] : tensors[t]; };
  auto state_part = [&](size_t t) { return par.shards_optimizer_state() ? shard[t] : tensors[t]; };
  std::vector<int64_t> updated;  // what this rank's update runs over, tensor by tensor
  int64_t largest_matrix = 0, full_gradients = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t n = tensors[t];
    s.weights += grad_bytes(weight_part(t));
    if (grad_part(t) > 0) s.all_gradients += grad_bytes(grad_part(t));
    full_gradients += grad_bytes(n);
    largest_matrix = std::max(largest_matrix, n);
    if (state_part(t) == 0) continue;  // another rank's
    if (state_on_device) s.optimizer_state += StateBytes(run, state_part(t));
    updated.push_back(state_part(t));
  }
  if (state_on_device && run.optimizer == vramlab::v1::ADAMW_8BIT) {
    // The signed and unsigned code maps: values (256) and midpoints (255), fp32.
    s.optimizer_state +=
        2 * (AllocatedBytes(run.device, layout::kAdamW8bitMapEntries * kFp32) +
             AllocatedBytes(run.device, (layout::kAdamW8bitMapEntries - 1) * kFp32));
  }
  // Layer 0's tensors stand for every layer's (all are alike). The vocabulary-sized parameter is
  // embed_tokens when tied, else lm_head (the last entry), whose gradient backward makes first.
  const size_t head = run.model.tie_word_embeddings ? 0 : tensors.size() - 1;
  auto grad_of = [&](size_t t) { return grad_part(t) > 0 ? grad_bytes(grad_part(t)) : 0; };
  auto state_of = [&](size_t t) { return state_part(t) > 0 ? StateBytes(run, state_part(t)) : 0; };
  for (size_t t = LayerTensorBegin(run.model, 0);
       t < LayerTensorBegin(run.model, 1) && t < tensors.size() && run.model.num_layers > 0; ++t) {
    s.layer_gradients += grad_of(t);
    if (state_on_device) s.layer_state += state_of(t);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    s.tensor_gradients.push_back(grad_of(t));
    s.tensor_state.push_back(state_on_device ? state_of(t) : 0);
  }
  s.head_gradient = grad_of(head);
  if (state_on_device) s.head_state = state_of(head);
  if (par.partitions_gradients()) {
    // SHARD_GRADIENTS: every rank's backward makes every gradient whole, as one process's does:
    // the vocabulary-sized one (and a tied embedding's fresh one) and each layer's in full. The
    // rank keeps its own (all_gradients); the others' are freed once reduced to their owners, a
    // layer at a time during backward (the root's after it): OthersGradients.
    s.head_gradient = grad_bytes(tensors[head]);
    s.layer_gradients = 0;
    std::vector<int64_t> bytes;
    std::vector<bool> owned;
    std::vector<int> made_in;
    const size_t layers_end = LayerTensorBegin(run.model, run.model.num_layers);
    for (size_t t = 0; t < tensors.size(); ++t) {
      const bool in_layers = t >= LayerTensorBegin(run.model, 0) && t < layers_end;
      if (in_layers && t < LayerTensorBegin(run.model, 1))
        s.layer_gradients += grad_bytes(tensors[t]);
      bytes.push_back(grad_bytes(tensors[t]));
      owned.push_back(grad_part(t) > 0);
      const int layer =
          static_cast<int>((t - LayerTensorBegin(run.model, 0)) / TensorsPerLayer(run.model));
      made_in.push_back(t == 0 ? kMadeInEmbedding : in_layers ? layer : kMadeBeforeLayers);
    }
    s.others_gradients = GradientsOfOthers(bytes, owned, made_in, run.model.num_layers);
  }
  if (run.in_backward) {
    s.gradients = 0;
    s.in_backward_update_temporaries = LargestSingleTensorUpdate(run, tensors);
  } else {
    s.gradients = s.all_gradients;
    s.step_temporaries = StepTemporaries(run, updated);
  }
  if (run.device == Device::kCpu)
    s.load_temporaries = AllocatedBytes(run.device, largest_matrix * kFp32);
  int64_t largest_shard = 0;
  for (size_t t = 0; t < tensors.size(); ++t)
    largest_shard = std::max(largest_shard, grad_bytes(shard[t]));
  AddWholeModelLoad(run, full_gradients, largest_shard, &s);
  AddParallelBuffers(run, &s);
  return s;
}

}  // namespace vramlab::server::estimate
