#include "worker/train/fixed_shape_run.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <torch/cuda.h>

#include "worker/adapters/lora.h"
#include "worker/adapters/qlora.h"
#include "worker/memory/oom.h"
#include "worker/model/init.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_model.h"
#include "worker/optim/optimizer.h"
#include "worker/safetensors/load_error.h"
#include "worker/safetensors/loader.h"
#include "worker/safetensors/safetensors_writer.h"
#include "worker/train/kernel_profile.h"
#include "worker/train/phase_tracker.h"
#include "worker/train/spec_conversions.h"
#include "worker/train/throughput.h"
#include "worker/train/token_source.h"

namespace vramlab::worker {
namespace {

// Everything a point allocates on the device, destroyed together in TEARDOWN.
struct LiveModel {
  Qwen2ForCausalLM model{nullptr};
  std::unique_ptr<Optimizer> optimizer;
};

TokenSource MakeTokenSource(const DataSpec& data, int64_t vocab_size) {
  if (!data.token_ids_file.empty()) return TokenSource::FromFile(data.token_ids_file, vocab_size);
  return TokenSource::Synthetic(data.seed, data.token_id_bound);
}

class PointRunner {
 public:
  PointRunner(const ExperimentSpec& spec, const DecoderConfig& config, const FixedShape& shape,
              const WorkerContext& context)
      : spec_(spec),
        config_(config),
        shape_(shape),
        context_(context),
        tracker_(
            context.monitor, context.sink,
            [this](const PhaseMeasurement& m) { context_.anatomy->OnPhase(m); },
            [this](const LoopPosition& position, uint64_t ledger_mark) {
              AttributePhase(position, ledger_mark);
            }) {
    tracker_.set_sweep_index(shape.sweep_index);
  }

  FixedShapeOutcome Run() {
    context_.monitor->StartPoint();
    context_.anatomy->Reset();
    LiveModel& live = live_;
    try {
      Load(live);
      Train(live);
      SaveParameters(live);
    } catch (const std::exception& e) {
      if (!IsOutOfMemory(e)) throw;
      // Still inside the point: the model and optimizer state are alive for the reading.
      RecordOom(e);
    }
    if (live.model) outcome_.attention_backend = live.model->attention_backend();
    context_.backend->SettleLedger();
    if (context_.parallel != nullptr && context_.parallel->full_shard() != nullptr) {
      const FullShard& full = *context_.parallel->full_shard();
      context_.anatomy->SetShardingBuffersBytes(full.peak_gathered_bytes(),
                                                full.peak_communication_bytes());
    } else if (context_.parallel != nullptr && context_.parallel->gradient_reduction() != nullptr) {
      context_.anatomy->SetShardingBuffersBytes(
          0, context_.parallel->gradient_reduction()->peak_communication_bytes());
    }
    outcome_.anatomy = context_.anatomy->Build(context_.monitor->Read());
    Summarize();
    Teardown(live);
    return std::move(outcome_);
  }

 private:
  void Load(LiveModel& live) {
    tracker_.Begin(Phase::kLoad, 0, 0);
    // QLoRA: built and loaded on the host; AttachQlora quantises onto the device (qlora.h).
    // SHARD_FULL: built and loaded on the host; the rank copies only its shards to the device.
    const bool qlora = spec_.training.adapter.kind == AdapterKind::kQlora;
    const torch::Device device = context_.backend->device();
    torch::Device build_device = qlora ? torch::Device(torch::kCPU) : device;
    if (context_.parallel != nullptr)
      build_device = context_.parallel->BuildDevice(build_device, qlora);
    live.model = Qwen2ForCausalLM(config_, ToModelOptions(spec_.training, build_device));
    if (!spec_.model.weights_dir.empty()) {
      LoadSafetensorsDir(*live.model, spec_.model.weights_dir);
    } else {
      InitializeWeights(*live.model, spec_.model.init_seed, config_.initializer_range);
    }
    if (AdapterEnabled(spec_.training.adapter)) AttachAdapters(live);
    if (context_.parallel != nullptr) AttachToRanks(live);
    tracker_.End();
    try {
      // Only what trains: every parameter, or the adapters alone.
      const OptimizerOptions options = ToOptimizerOptions(spec_.training.optimizer);
      live.optimizer =
          context_.parallel != nullptr
              ? context_.parallel->MakeRankOptimizer(TrainableParameters(*live.model), options)
              : MakeOptimizer(TrainableParameters(*live.model), options);
    } catch (const std::invalid_argument& e) {
      throw SpecError("training.optimizer", e.what());
    }
    // Which implementation runs the step (e.g. the fused 8-bit kernel or the ATen ops), once per
    // run.
    if (shape_.sweep_index == 0) {
      context_.sink->Notice(NoticeLevel::kInfo, "optimizer: " + live.optimizer->Describe());
    }
  }

  // SHARD_FULL, inside LOAD: the rank keeps its shards, so LOAD's growth is the shards alone; the
  // adapters' share is their shards' bytes, and QLoRA's quantisation constants are the absmax
  // codes' and scales' shards and the lookup tables every rank keeps whole.
  void AttachToRanks(LiveModel& live) {
    context_.parallel->AttachModel(*live.model, context_.backend->device());
    const FullShard* full = context_.parallel->full_shard();
    if (full == nullptr || !AdapterEnabled(spec_.training.adapter)) return;
    int64_t adapter_bytes = 0;
    for (const auto& named : full->TrainableShards()) adapter_bytes += named.second.nbytes();
    context_.anatomy->SetAdapterWeightsBytes(adapter_bytes);
    if (spec_.training.adapter.kind != AdapterKind::kQlora) return;
    int64_t constant_bytes = nf4_table_bytes_;
    for (const auto& named : full->BufferShards()) {
      if (IsNf4ConstantBuffer(named.first)) constant_bytes += named.second.nbytes();
    }
    context_.anatomy->SetQuantizationConstantsBytes(constant_bytes);
  }

  // At the end of each phase, tells the ledger what the phase's surviving allocations are
  // (allocation_ledger.h). Recomputed activations (checkpointing) are allocated in BACKWARD and
  // freed there, so at a peak in backward they count as temporaries.
  void AttributePhase(const LoopPosition& position, uint64_t ledger_mark) {
    AllocationLedger* const ledger = context_.monitor->ledger();
    if (ledger == nullptr) return;
    std::unordered_map<uintptr_t, BlockCategory> known;
    BlockCategory survivors = BlockCategory::kTemporary;
    const FullShard* full =
        context_.parallel != nullptr ? context_.parallel->full_shard() : nullptr;
    switch (position.phase) {
      case Phase::kLoad:
        survivors = BlockCategory::kWeights;
        if (live_.model && AdapterEnabled(spec_.training.adapter)) AddAdapterTensors(known);
        break;
      case Phase::kForward:
        survivors = BlockCategory::kActivations;  // what forward leaves for backward
        // SHARD_FULL's gathered parameters alive after forward (the root, and every layer
        // without reshard_after_forward) are no activations; the ledger has no category of its
        // own for them, so they stay temporaries there (the anatomy counts them apart).
        if (full != nullptr) {
          for (const torch::Tensor& p : full->GatheredParameters())
            known[StorageAddress(p)] = BlockCategory::kTemporary;
        }
        break;
      case Phase::kBackward:
        if (live_.model) {
          for (const torch::Tensor& p : live_.model->parameters()) {
            if (p.grad().defined()) known[StorageAddress(p.grad())] = BlockCategory::kGradients;
          }
        }
        if (full != nullptr) {
          for (const torch::Tensor& shard : full->Shards()) {
            if (shard.grad().defined())
              known[StorageAddress(shard.grad())] = BlockCategory::kGradients;
          }
        }
        // In-backward optimizers create their state lazily there and keep no gradients.
        if (spec_.training.optimizer.in_backward) survivors = BlockCategory::kOptimizerState;
        break;
      case Phase::kOptimizerStep:
        survivors = BlockCategory::kOptimizerState;  // created lazily by the first step
        break;
      default:
        break;
    }
    ledger->Attribute(ledger_mark, survivors, known);
  }

  // LOAD's survivors that are not base weights: the trainable adapters, and QLoRA's quantisation
  // constants (the shared NF4 lookup tables, a few hundred bytes, stay with the weights).
  void AddAdapterTensors(std::unordered_map<uintptr_t, BlockCategory>& known) {
    for (const auto& named : TrainableParameters(*live_.model)) {
      known[StorageAddress(named.second)] = BlockCategory::kAdapterWeights;
    }
    const FullShard* full =
        context_.parallel != nullptr ? context_.parallel->full_shard() : nullptr;
    if (full != nullptr) {
      for (const auto& named : full->TrainableShards()) {
        known[StorageAddress(named.second)] = BlockCategory::kAdapterWeights;
      }
      // The model's NF4 buffers are freed: the rank holds their shards.
      for (const auto& named : full->BufferShards()) {
        if (IsNf4ConstantBuffer(named.first))
          known[StorageAddress(named.second)] = BlockCategory::kQuantizationConstants;
      }
      return;
    }
    for (const auto& buffer : live_.model->named_buffers()) {
      if (IsNf4ConstantBuffer(buffer.key()))
        known[StorageAddress(buffer.value())] = BlockCategory::kQuantizationConstants;
    }
  }

  static uintptr_t StorageAddress(const torch::Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.storage().data_ptr().get());
  }

  // Inside LOAD: the anatomy separates the adapters' (and quantisation constants') allocation
  // from the base weights'. LoRA: the allocator's growth over attaching; QLoRA: the tensors'
  // storage bytes (its allocations are interleaved with the base weights' moves).
  void AttachAdapters(LiveModel& live) {
    const LoraOptions options = ToLoraOptions(spec_.training.adapter, spec_.model.init_seed);
    AdapterSummary adapters;
    try {
      if (spec_.training.adapter.kind == AdapterKind::kQlora) {
        const QloraSummary summary = AttachQlora(*live.model, options, context_.backend->device());
        adapters = summary.adapters;
        context_.anatomy->SetAdapterWeightsBytes(summary.adapters.adapter_bytes);
        context_.anatomy->SetQuantizationConstantsBytes(summary.quantization_constant_bytes);
        nf4_table_bytes_ = summary.nf4_table_bytes;
      } else {
        const int64_t before = context_.monitor->Read().allocated_bytes;
        adapters = AttachLora(*live.model, options);
        context_.anatomy->SetAdapterWeightsBytes(context_.monitor->Read().allocated_bytes - before);
      }
    } catch (const std::invalid_argument& e) {
      throw SpecError("training.adapter", e.what());
    }
    adapter_parameters_ = adapters.trainable_parameters;
    // As PEFT's print_trainable_parameters(), once per run.
    if (shape_.sweep_index == 0) {
      const double total =
          static_cast<double>(adapters.trainable_parameters + adapters.frozen_parameters);
      char percent[32];
      std::snprintf(percent, sizeof(percent), "%.4f",
                    100.0 * adapters.trainable_parameters / total);
      context_.sink->Notice(
          NoticeLevel::kInfo,
          "trainable params: " + std::to_string(adapters.trainable_parameters) +
              " || all params: " +
              std::to_string(adapters.trainable_parameters + adapters.frozen_parameters) +
              " || trainable%: " + percent);
    }
  }

  void Train(LiveModel& live) {
    const TrainingSpec& t = spec_.training;
    const int32_t accum = t.grad_accum_steps;
    const LossImpl loss_impl = ToLossImpl(t.loss);
    const double flops_per_token =
        TrainingFlopsPerToken(config_, shape_.seq_len, adapter_parameters_);
    const double tokens_per_step =
        static_cast<double>(shape_.micro_batch_size) * shape_.seq_len * accum;
    TokenSource tokens = MakeTokenSource(t.data, config_.vocab_size);
    const torch::Device device = context_.backend->device();

    for (int32_t step = 0; step < t.steps; ++step) {
      KernelProfile profile;
      const bool profiling = step == t.steps - 1 && StartKernelProfile(&profile, device.is_cuda());
      const auto step_start = std::chrono::steady_clock::now();
      double loss_sum = 0;
      for (int32_t micro = 0; micro < accum; ++micro) {
        // Inputs exist before FORWARD begins and after BACKWARD ends, so they cancel out of the
        // gradient and activation arithmetic (anatomy_builder.h).
        torch::Tensor ids = NextRows(tokens).to(device);
        if (context_.parallel != nullptr) context_.parallel->BeginMicroBatch(micro == accum - 1);
        tracker_.Begin(Phase::kForward, step, micro);
        torch::Tensor loss = CausalLmLoss(live.model, ids, ids, loss_impl, t.loss_chunk_tokens);
        // One optimizer step per cycle must see the mean over the cycle's micro-batches.
        if (accum > 1) loss = loss / static_cast<double>(accum);
        tracker_.End();

        tracker_.Begin(Phase::kBackward, step, micro);
        // The last micro-batch's backward completes the gradients of this step's update. A
        // parallel run averages them after that backward, so the update must not start during it.
        if (micro == accum - 1 && context_.parallel == nullptr)
          live.optimizer->ExpectStepAfterNextBackward();
        loss.backward();
        if (context_.parallel != nullptr) context_.parallel->AfterBackward(micro == accum - 1);
        loss_sum += loss.item<double>() * accum;
        loss = torch::Tensor();
        if (t.optimizer.in_backward && step == 0 && micro == 0) {
          context_.anatomy->SetInBackwardStateBytes(live.optimizer->DeviceStateBytes());
        }
        tracker_.End();
      }

      tracker_.Begin(Phase::kOptimizerStep, step, accum - 1);
      live.optimizer->Step();
      if (context_.parallel != nullptr) context_.parallel->AfterStep();
      const PhaseMeasurement optimizer_phase = tracker_.End();
      if (step == 0) CrossCheckOptimizerState(*live.optimizer, optimizer_phase);

      tracker_.Begin(Phase::kZeroGrad, step, accum - 1);
      live.optimizer->ZeroGrad();
      if (context_.parallel != nullptr) context_.parallel->ZeroGrad();
      tracker_.End();
      if (device.is_cuda()) torch::cuda::synchronize();

      StepResult result;
      result.step = step;
      result.sweep_index = shape_.sweep_index;
      result.loss = context_.parallel != nullptr
                        ? context_.parallel->MeanOverRanks(loss_sum / accum)
                        : loss_sum / accum;
      result.step_time_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      result.tokens_per_second =
          result.step_time_seconds > 0 ? tokens_per_step / result.step_time_seconds : 0;
      result.mfu = ModelFlopsUtilization(result.tokens_per_second, flops_per_token,
                                         context_.backend->peak_bf16_flops());
      const MemorySample now = context_.monitor->Read();
      result.peak_allocated_bytes = now.peak_allocated_bytes;
      result.peak_reserved_bytes = now.peak_reserved_bytes;
      if (profiling) FinishKernelProfile(&profile, step, result.step_time_seconds);
      context_.sink->Step(result);
      outcome_.steps.push_back(result);
    }
    // A delayed update (training.optimizer.delayed_update) still holds the last step's: the final
    // parameters, the report and --save-parameters include every step's update.
    live.optimizer->Finish();
    if (device.is_cuda()) torch::cuda::synchronize();
    // Offload: how much of the host's step the backward hid (BENCHMARKS.md, the offload rows).
    const std::string host_step = live.optimizer->HostStepSummary();
    if (!host_step.empty()) context_.sink->Notice(NoticeLevel::kInfo, "optimizer: " + host_step);
  }

  // A parallel rank's rows of the global micro-batch, drawn as one process with world_size times
  // the micro-batch would draw them (token_source.h: rows come from one stream).
  torch::Tensor NextRows(TokenSource& tokens) {
    if (context_.parallel == nullptr) return tokens.Next(shape_.micro_batch_size, shape_.seq_len);
    const int64_t global_rows =
        static_cast<int64_t>(shape_.micro_batch_size) * context_.parallel->world_size();
    return context_.parallel->LocalRows(tokens.Next(global_rows, shape_.seq_len));
  }

  // The first point's parameters, as the model names them, after its last step.
  // A parallel run's ranks all take part (SHARD_FULL gathers the parameters).
  void SaveParameters(LiveModel& live) {
    if (shape_.sweep_index != 0) return;
    const bool wanted = !context_.save_parameters_path.empty();
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    if (context_.parallel != nullptr) {
      tensors = context_.parallel->ParametersToSave(*live.model, wanted);
    } else if (wanted) {
      for (const auto& named : live.model->named_parameters())
        tensors.emplace_back(named.key(), named.value().detach());
    }
    if (!wanted) return;
    try {
      WriteSafetensors(context_.save_parameters_path, tensors);
    } catch (const LoadError& e) {  // not the weights' fault: an internal error of this run
      throw std::runtime_error(std::string("--save-parameters: ") + e.what());
    }
  }

  // The first point's last step only: every point of a sweep would overwrite one file.
  bool StartKernelProfile(KernelProfile* profile, bool cuda) {
    if (context_.kernel_profile_path.empty() || shape_.sweep_index != 0) return false;
    std::string why_not;
    if (profile->Start(cuda, &why_not)) return true;
    context_.sink->Notice(NoticeLevel::kWarning, "no kernel profile: " + why_not);
    return false;
  }

  void FinishKernelProfile(KernelProfile* profile, int32_t step, double step_seconds) {
    std::string why_not;
    if (profile->Finish(context_.kernel_profile_path, step, step_seconds, &why_not)) {
      context_.sink->Notice(NoticeLevel::kInfo,
                            "kernel profile of step " + std::to_string(step) + " (timed " +
                                "with the profiler on) written to " + context_.kernel_profile_path);
    } else {
      context_.sink->Notice(NoticeLevel::kWarning, "no kernel profile: " + why_not);
    }
  }

  // The allocator's growth over the first step is the state; the optimizer's own count must agree
  // (both are exact on the CPU). A disagreement is worth a person's attention, not a failure.
  void CrossCheckOptimizerState(const Optimizer& optimizer, const PhaseMeasurement& phase) {
    if (spec_.training.optimizer.in_backward) return;
    const int64_t measured = phase.end.allocated_bytes - phase.begin.allocated_bytes;
    const int64_t reported = optimizer.DeviceStateBytes();
    const int64_t difference = measured > reported ? measured - reported : reported - measured;
    if (difference > reported / 100 + 4096) {
      context_.sink->Notice(NoticeLevel::kWarning,
                            "optimizer state: the allocator grew by " + std::to_string(measured) +
                                " bytes over the first step, the optimizer reports " +
                                std::to_string(reported) + " device bytes (" +
                                optimizer.Describe() + ")");
    }
  }

  void RecordOom(const std::exception& e) {
    OomReport& report = outcome_.oom_report;
    outcome_.oom = true;
    Stamp(context_.monitor->position(), &report);
    report.message = FirstLinesOfError(e.what());
    const OomDetails details = context_.backend->LastOom();
    report.requested_bytes = details.known && details.requested > 0
                                 ? details.requested
                                 : RequestedBytesFromMessage(report.message);
    report.free_bytes = details.free;
    report.memory = context_.monitor->Read(/*free_blocks=*/true);
    report.has_memory = true;
    if (details.known) {
      // The summary shows the allocator as it was when it refused, not after the unwinding.
      report.memory.allocated_bytes = details.allocated_at_failure;
      report.memory.reserved_bytes = details.reserved_at_failure;
    }
    context_.sink->Oom(report);
    if (context_.on_oom) context_.on_oom();
  }

  // Step time, tokens/s and MFU of the steady steps: the first step is the warm-up (it allocates
  // the optimizer state, warms the allocator and the kernels' caches) and is left out, its time
  // kept apart. Without a steady step they stay 0: a warm-up number is not a speed.
  void Summarize() {
    std::vector<double> times;
    for (const StepResult& s : outcome_.steps) times.push_back(s.step_time_seconds);
    if (times.empty()) return;
    outcome_.warmup_steps = 1;
    outcome_.warmup_step_time_seconds = times.front();
    times.erase(times.begin());
    outcome_.steady_steps = static_cast<int32_t>(times.size());
    outcome_.final_loss = outcome_.steps.back().loss;
    if (times.empty()) return;
    outcome_.median_step_time_seconds = Median(times);
    const double tokens_per_step = static_cast<double>(shape_.micro_batch_size) * shape_.seq_len *
                                   spec_.training.grad_accum_steps;
    outcome_.tokens_per_second = outcome_.median_step_time_seconds > 0
                                     ? tokens_per_step / outcome_.median_step_time_seconds
                                     : 0;
    outcome_.mfu =
        ModelFlopsUtilization(outcome_.tokens_per_second,
                              TrainingFlopsPerToken(config_, shape_.seq_len, adapter_parameters_),
                              context_.backend->peak_bf16_flops());
  }

  void Teardown(LiveModel& live) {
    const int32_t last_step = outcome_.steps.empty() ? 0 : outcome_.steps.back().step;
    tracker_.Begin(Phase::kTeardown, last_step, 0);
    live.optimizer.reset();
    if (context_.parallel != nullptr) context_.parallel->ReleaseModel();
    live.model = Qwen2ForCausalLM(nullptr);
    context_.backend->EmptyCache();
    tracker_.End();
  }

  const ExperimentSpec& spec_;
  const DecoderConfig& config_;
  const FixedShape shape_;
  const WorkerContext context_;
  PhaseTracker tracker_;
  LiveModel live_;
  FixedShapeOutcome outcome_;
  int64_t adapter_parameters_ = 0;  // trainable adapter parameters; 0 when every weight trains
  int64_t nf4_table_bytes_ = 0;     // QLoRA's shared lookup tables (QloraSummary)
};

}  // namespace

FixedShapeOutcome RunAtFixedShape(const ExperimentSpec& spec, const DecoderConfig& config,
                                  const FixedShape& shape, const WorkerContext& context) {
  return PointRunner(spec, config, shape, context).Run();
}

}  // namespace vramlab::worker
