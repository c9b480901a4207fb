#include "worker/optim/host_stepper.h"

#include <algorithm>

namespace vramlab::worker::optim_internal {

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
      UpdateHostRange(rule, index, step, begin, param_flat.narrow(0, begin, len),
                      grad_host.narrow(0, begin, len));
    }
    return;
  }
  // Synchronous copies: a chunk's gradient comes down, the host updates it, the new parameter
  // values go back up before the staging buffers are reused.
  for (int64_t begin = 0; begin < n; begin += kStagingChunkElements) {
    const int64_t len = std::min(kStagingChunkElements, n - begin);
    torch::Tensor grad_host = StagingView(grad_staging_, grad.scalar_type(), len, /*pinned=*/true);
    grad_host.copy_(grad_flat.narrow(0, begin, len));
    torch::Tensor param_host =
        StagingView(param_staging_, param.scalar_type(), len, /*pinned=*/true);
    if (rule.ReadsParam()) param_host.copy_(param_flat.narrow(0, begin, len));
    UpdateHostRange(rule, index, step, begin, param_host, grad_host);
    param_flat.narrow(0, begin, len).copy_(param_host);
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

torch::Tensor StagingView(torch::Tensor& buffer, torch::ScalarType dtype, int64_t n, bool pinned) {
  if (!buffer.defined() || buffer.scalar_type() != dtype || buffer.numel() < n) {
    buffer = torch::Tensor();  // release the old buffer first
    buffer = torch::empty({std::max(n, kStagingChunkElements)},
                          torch::TensorOptions().dtype(dtype).pinned_memory(pinned));
  }
  return buffer.narrow(0, 0, n);
}

int64_t HostStepper::StagingBytes() const {
  int64_t bytes = 0;
  for (const torch::Tensor* t : {&param_staging_, &grad_staging_}) {
    if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
  }
  return bytes;
}

}  // namespace vramlab::worker::optim_internal
