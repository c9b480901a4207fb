#include "worker/train/run_worker.h"

#include <chrono>
#include <iostream>
#include <memory>

#include <unistd.h>

#include <torch/version.h>

#include "worker/faults/fault_injector.h"
#include "worker/memory/allocator_env.h"
#include "worker/memory/device_backend.h"
#include "worker/memory/memory_monitor.h"
#include "worker/memory/oom.h"
#include "worker/memory/sampler.h"
#include "worker/model/attention.h"
#include "worker/parallel/data_parallel.h"
#include "worker/parallel/rank_group.h"
#include "worker/safetensors/load_error.h"
#include "worker/train/anatomy_builder.h"
#include "worker/train/experiment_runner.h"
#include "worker/train/phase_tracker.h"
#include "worker/train/spec_conversions.h"

#ifndef VRAMLAB_VERSION
#define VRAMLAB_VERSION "dev"
#endif

namespace vramlab::worker {
namespace {

std::unique_ptr<DeviceBackend> MakeBackend(DeviceKind device) {
  if (device == DeviceKind::kCuda) {
    if (!CudaDeviceAvailable())
      throw SpecError("device", "CUDA was asked for but no CUDA device is available");
    return MakeCudaBackend();
  }
  if (device == DeviceKind::kUnspecified && CudaDeviceAvailable()) return MakeCudaBackend();
  return MakeCpuBackend();
}

void Log(const std::string& line) { std::cerr << "vramlab-worker: " << line << std::endl; }

// Everything after the spec is known. Throws; RunWorker maps exceptions to events.
class Session {
 public:
  Session(ExperimentSpec spec, EventSink& sink, const WorkerHooks& hooks)
      : spec_(std::move(spec)), sink_(sink), hooks_(hooks) {}

  int Run() {
    const DecoderConfig config = ResolveModelConfig(spec_.model);
    ResolveAgainstModel(spec_, {config.vocab_size, config.hidden_size, config.intermediate_size,
                                config.num_attention_heads, config.num_key_value_heads});
    ValidateKernelsRunnable(
        spec_, spec_.device == DeviceKind::kCuda ||
                   (spec_.device == DeviceKind::kUnspecified && CudaDeviceAvailable()));
    backend_ = MakeBackend(spec_.device);
    monitor_ = std::make_unique<MemoryMonitor>(backend_.get(), start_);
    EmitStarted(config);
    EmitNotices();
    JoinRanks();
    AttachLedger();

    Sampler sampler(monitor_.get(), &sink_,
                    std::chrono::milliseconds(spec_.memory.sample_interval_ms),
                    [this](const MemorySample& s) { anatomy_.OnSample(s); });
    Setup();
    sampler.Start();
    if (spec_.fault != Fault::kUnspecified) {
      sampler.WaitForFirstSample();
      InjectFault(spec_.fault, sink_, *monitor_);
    }

    WorkerContext context;
    context.sink = &sink_;
    context.backend = backend_.get();
    context.monitor = monitor_.get();
    context.anatomy = &anatomy_;
    context.on_oom = [this] { WriteSnapshot(); };
    context.kernel_profile_path = hooks_.kernel_profile_path;
    context.parallel = parallel_.get();
    context.save_parameters_path = hooks_.save_parameters_path;
    ExperimentResult result = RunExperiment(spec_, config, context, hooks_.sweep_point);
    sampler.Stop();

    if (!result.oom) WriteSnapshot();  // at an ending OOM it was written at that moment
    if (result.has_report) {
      FinalReport& report = result.report;
      report.parameter_count = config.ParameterCount();
      report.device_name = backend_->device_name();
      report.snapshot_written = snapshot_written_;
      report.sampler_overhead_ratio = sampler.overhead_ratio();
      sink_.Report(report);
    }
    Log(std::string("finished: ") + (result.oom ? "out of memory" : "succeeded") +
        "; sampler: " + sampler.CostSummary());
    return result.oom ? kExitOutOfMemory : kExitSucceeded;
  }

 private:
  void EmitStarted(const DecoderConfig& config) {
    WorkerStarted started;
    started.worker_version = VRAMLAB_VERSION;
    started.torch_version = TORCH_VERSION;
    started.device = backend_->kind();
    started.device_name = backend_->device_name();
    started.device_total_bytes = backend_->Usage().total;
    started.parameter_count = config.ParameterCount();
    started.pid = static_cast<int32_t>(getpid());
    sink_.Started(started);
    Log("started on " + started.device_name + " with " + std::to_string(started.parameter_count) +
        " parameters");
  }

  void EmitNotices() {
    if (spec_.training.attention == plain::AttentionImpl::kSdpa && !SdpaAvailable()) {
      sink_.Notice(NoticeLevel::kWarning, std::string("sdpa is unavailable on LibTorch ") +
                                              TORCH_VERSION + "; attention runs eager");
    }
    if (spec_.training.kernels == plain::KernelsImpl::kFused) {
      const TrainingSpec& t = spec_.training;
      sink_.Notice(NoticeLevel::kInfo,
                   "training.kernels FUSED: RMSNorm, rotary, SwiGLU and linear + cross-entropy run "
                   "vramlab's CUDA "
                   "kernels (docs/KERNELS.md); the loss takes " +
                       (t.loss == plain::LossImpl::kChunked
                            ? std::to_string(t.loss_chunk_tokens) + " tokens a chunk"
                            : std::string("all tokens of a micro-batch in one chunk")));
    }
    const bool on_cpu = backend_->kind() == DeviceKind::kCpu;
    if (on_cpu && !spec_rules::AllocatorConfString(spec_.memory.allocator).empty()) {
      sink_.Notice(NoticeLevel::kInfo,
                   "memory.allocator configures the CUDA caching allocator; ignored on the CPU");
    }
    // The lab report's scripts run one optimizer step: the state it creates (after backward, or
    // during it with in_backward) is never held whole through a forward and backward, as every
    // later step of training holds it. Every optimizer kind keeps state (SGD's momentum 0 means
    // 0.9); offload keeps it off the device.
    if (spec_.training.steps == 1 && !spec_.training.optimizer.offload_to_cpu) {
      sink_.Notice(
          NoticeLevel::kInfo,
          "training.steps = 1: the optimizer state comes into being with the only update, so "
          "this run's forward and backward never hold all of it, as every later step of "
          "training does (steps >= 2 measures that peak)");
    }
    if (on_cpu && spec_.memory.device_memory_limit_bytes > 0) {
      sink_.Notice(NoticeLevel::kInfo,
                   "the counting CPU allocator enforces memory.device_memory_limit_bytes = " +
                       std::to_string(spec_.memory.device_memory_limit_bytes));
    }
  }

  // A parallel run's rank joins the others here, once its device is known, and says which it is
  // (the `started` event has no field for it).
  void JoinRanks() {
    if (!ParallelActive(spec_.parallel)) return;
    const RankFlags& flags = hooks_.rank_flags;
    Log("rank " + std::to_string(flags.rank) + " of " + std::to_string(spec_.parallel.world_size) +
        ": joining at " + flags.rendezvous);
    ranks_ =
        RankGroup::Join(flags, spec_.parallel.world_size, backend_->kind() == DeviceKind::kCuda);
    parallel_ = std::make_unique<DataParallel>(ranks_.get(), spec_.parallel);
    sink_.Notice(NoticeLevel::kInfo,
                 "rank " + std::to_string(flags.rank) +
                     " of a parallel run: " + parallel_->Describe() + ", " +
                     std::to_string(spec_.training.micro_batch_size) +
                     " rows of each global micro-batch of " +
                     std::to_string(spec_.training.micro_batch_size * spec_.parallel.world_size));
  }

  void Setup() {
    PhaseTracker tracker(monitor_.get(), &sink_, nullptr);
    // A worker run for one point of a sweep sets up for that point.
    if (hooks_.sweep_point.has_value()) tracker.set_sweep_index(hooks_.sweep_point->index);
    tracker.Begin(Phase::kSetup, 0, 0);
    backend_->SetLimit(spec_.memory.device_memory_limit_bytes);
    if (spec_.memory.record_history) {
      std::string why_not;
      if (!backend_->StartHistory(&why_not)) {
        sink_.Notice(NoticeLevel::kWarning, "memory.record_history: " + why_not);
      }
    }
    tracker.End();
  }

  // The daemon names a snapshot path for every run; only the CUDA caching allocator has a
  // snapshot to write, so a CPU run writes none and has nothing to warn about.
  void WriteSnapshot() {
    if (spec_.memory.snapshot_path.empty() || backend_->kind() == DeviceKind::kCpu) return;
    std::string why_not;
    if (backend_->WriteSnapshot(spec_.memory.snapshot_path, &why_not)) {
      snapshot_written_ = true;
    } else if (!snapshot_failure_reported_) {
      snapshot_failure_reported_ = true;
      sink_.Notice(NoticeLevel::kWarning, "no allocator snapshot written: " + why_not);
    }
  }

  // The peak-moment anatomy needs every allocation and free (allocation_ledger.h).
  void AttachLedger() {
    AllocationLedger& ledger = ProcessLedger();
    ledger.Reset();
    std::string why_not;
    if (!backend_->AttachLedger(&ledger, &why_not)) {
      sink_.Notice(NoticeLevel::kInfo, "no anatomy of the peak moment: " + why_not);
      return;
    }
    monitor_->set_ledger(&ledger);
    anatomy_.set_ledger(&ledger);
  }

  ExperimentSpec spec_;
  EventSink& sink_;
  const WorkerHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<DeviceBackend> backend_;
  std::unique_ptr<MemoryMonitor> monitor_;
  AnatomyBuilder anatomy_;
  std::unique_ptr<RankGroup> ranks_;
  std::unique_ptr<DataParallel> parallel_;
  bool snapshot_written_ = false;
  bool snapshot_failure_reported_ = false;
};

// The event (which becomes the experiment's state_reason) carries the message without a C++
// backtrace; the worker log keeps the whole text for whoever debugs it.
int ReportError(EventSink& sink, ErrorKind kind, const std::string& message,
                const std::string& field, int code) {
  sink.Error(WorkerError{kind, FirstLinesOfError(message), field});
  const bool names_field = !field.empty() && message.compare(0, field.size(), field) != 0;
  Log("error: " + (names_field ? field + ": " : "") + message);
  return code;
}

}  // namespace

int RunWorker(const std::string& spec_text, EventSink& sink, const WorkerHooks& hooks) {
  try {
    ExperimentSpec spec = ParseExperimentSpec(spec_text);
    CheckRankFlags(spec.parallel, hooks.rank_flags);
    CheckSweepPoint(spec, hooks.sweep_point);
    if (hooks.before_device) hooks.before_device(spec);
    return Session(std::move(spec), sink, hooks).Run();
  } catch (const SpecError& e) {
    // The event names the field apart: its message is the reason alone, so that a reader joining
    // the two (the daemon's exit verdict) names the field once.
    return ReportError(sink, ErrorKind::kInvalidSpec, e.reason(), e.field(), kExitInvalidSpec);
  } catch (const LoadError& e) {
    return ReportError(sink, ErrorKind::kLoadFailed, e.what(), "model.weights_dir",
                       kExitLoadFailed);
  } catch (const std::exception& e) {
    const std::string message = FirstLinesOfError(e.what());
    if (IsOutOfMemory(e)) {
      // Outside any training point (setup): still an OOM answer, with what is known.
      OomReport oom;
      oom.message = message;
      oom.requested_bytes = RequestedBytesFromMessage(message);
      sink.Oom(oom);
      Log("out of memory outside the training loop: " + message);
      return kExitOutOfMemory;
    }
    return ReportError(sink, ErrorKind::kInternal, message, "", kExitInternalError);
  } catch (...) {
    return ReportError(sink, ErrorKind::kInternal, "unknown exception", "", kExitInternalError);
  }
}

}  // namespace vramlab::worker
