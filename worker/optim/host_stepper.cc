#include "worker/optim/host_stepper.h"

#include <algorithm>

#if defined(VRAMLAB_WITH_CUDA)
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace vramlab::worker::optim_internal {

#if defined(VRAMLAB_WITH_CUDA)
namespace {

// A CUDA event without timing, created on the current device at its first Record. Synchronize
// before any Record returns at once.
class StreamEvent {
 public:
  StreamEvent() = default;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  ~StreamEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  void Record(cudaStream_t stream) {
    if (event_ == nullptr) C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    C10_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  void Synchronize() const {
    if (event_ != nullptr) C10_CUDA_CHECK(cudaEventSynchronize(event_));
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace
#endif

void HostStepper::Update(UpdateRule& rule, size_t index, int64_t step, const torch::Tensor& param,
                         const torch::Tensor& grad) {
  torch::Tensor param_flat = param.view({-1});
  torch::Tensor grad_flat = grad.reshape({-1});
  const int64_t n = param_flat.numel();
  if (param.device().is_cpu()) {
    // In place, range by range, so the update's temporaries stay a few times one range.
    const torch::Tensor grad_host = grad_flat.to(param.device());
    for (int64_t begin = 0; begin < n; begin += kStagingChunkElements) {
      const int64_t len = std::min(kStagingChunkElements, n - begin);
      UpdateHostRange(rule, index, step, begin, param_flat.narrow(0, begin, len), grad_host.narrow(0, begin, len));
    }
    return;
  }
  UpdateStaged(rule, index, step, param_flat, grad_flat);
}

void HostStepper::UpdateStaged(UpdateRule& rule, size_t index, int64_t step,
                               const torch::Tensor& param_flat, const torch::Tensor& grad_flat) {
  const int64_t n = param_flat.numel();
  const int64_t chunks = (n + kStagingChunkElements - 1) / kStagingChunkElements;
  auto chunk_begin = [](int64_t k) { return k * kStagingChunkElements; };
  auto chunk_len = [&](int64_t k) { return std::min(kStagingChunkElements, n - chunk_begin(k)); };
  auto grad_host = [&](int64_t k) {
    return StagingView(grad_staging_[k % kSlots], grad_flat.scalar_type(), chunk_len(k));
  };
  auto param_host = [&](int64_t k) {
    return StagingView(param_staging_[k % kSlots], param_flat.scalar_type(), chunk_len(k));
  };
#if defined(VRAMLAB_WITH_CUDA)
  if (param_flat.is_cuda()) {
    // All copies go on the current stream, so they run after backward produced the gradients and
    // in issue order: down(k+1), up(k), down(k+2), ... A slot's parameter buffer is therefore
    // uploaded (up(k-2)) before the next download into it (down(k)) starts. The host must wait
    // for down(k) before reading chunk k, and for up(k-2) before writing the slot when nothing
    // was downloaded into it (rules that do not read the parameter).
    const c10::cuda::CUDAGuard device_guard(param_flat.device());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(param_flat.device().index()).stream();
    StreamEvent down[kSlots], up[kSlots];
    bool upload_pending[kSlots] = {false, false};
    auto issue_download = [&](int64_t k) {
      grad_host(k).copy_(grad_flat.narrow(0, chunk_begin(k), chunk_len(k)), /*non_blocking=*/true);
      if (rule.ReadsParam()) {
        param_host(k).copy_(param_flat.narrow(0, chunk_begin(k), chunk_len(k)), /*non_blocking=*/true);
      }
      down[k % kSlots].Record(stream);
    };
    issue_download(0);
    for (int64_t k = 0; k < chunks; ++k) {
      if (k + 1 < chunks) issue_download(k + 1);
      const int slot = static_cast<int>(k % kSlots);
      down[slot].Synchronize();
      if (upload_pending[slot]) up[slot].Synchronize();
      const torch::Tensor param_range = param_host(k);
      UpdateHostRange(rule, index, step, chunk_begin(k), param_range, grad_host(k));
      param_flat.narrow(0, chunk_begin(k), chunk_len(k)).copy_(param_range, /*non_blocking=*/true);
      up[slot].Record(stream);
      upload_pending[slot] = true;
    }
    // The parameter is final when Update returns, and the slots are free for the next one.
    for (int slot = 0; slot < kSlots; ++slot) {
      if (upload_pending[slot]) up[slot].Synchronize();
    }
    return;
  }
#endif
  // Synchronous copies: a chunk's gradient comes down, the host updates it, the new parameter
  // values go back up before the staging buffers are reused.
  for (int64_t k = 0; k < chunks; ++k) {
    const torch::Tensor grad_range = grad_host(k), param_range = param_host(k);
    grad_range.copy_(grad_flat.narrow(0, chunk_begin(k), chunk_len(k)));
    if (rule.ReadsParam()) param_range.copy_(param_flat.narrow(0, chunk_begin(k), chunk_len(k)));
    UpdateHostRange(rule, index, step, chunk_begin(k), param_range, grad_range);
    param_flat.narrow(0, chunk_begin(k), chunk_len(k)).copy_(param_range);
  }
}

void HostStepper::UpdateHostRange(UpdateRule& rule, size_t index, int64_t step, int64_t begin,
                                  const torch::Tensor& param_range,
                                  const torch::Tensor& grad_range) {
  // One call over the whole range: each ATen op inside spreads itself over the intra-op threads.
  // Splitting the range over at::parallel_for tasks instead (each op then single-threaded) hung in
  // libgomp on the GPU host (every OpenMP thread parked in a barrier, the caller in the next
  // op's gomp_team_start; LibTorch 2.11+cu130 with pinned host tensors).
  rule.UpdateRange(index, step, begin, param_range, grad_range);
}

torch::Tensor HostStepper::StagingView(torch::Tensor& buffer, torch::ScalarType dtype, int64_t n) {
  if (!buffer.defined() || buffer.scalar_type() != dtype || buffer.numel() < n) {
    buffer = torch::Tensor();  // release the old buffer first
    buffer = torch::empty({std::max(n, kStagingChunkElements)},
                          torch::TensorOptions().dtype(dtype).pinned_memory(true));
  }
  return buffer.narrow(0, 0, n);
}

int64_t HostStepper::StagingBytes() const {
  int64_t bytes = 0;
  for (int slot = 0; slot < kSlots; ++slot) {
    for (const torch::Tensor* t : {&param_staging_[slot], &grad_staging_[slot]}) {
      if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
    }
  }
  return bytes;
}

}  // namespace vramlab::worker::optim_internal
