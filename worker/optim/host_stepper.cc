#include "worker/optim/host_stepper.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace vramlab::worker::optim_internal {

void HostStepper::Update(UpdateRule& rule, size_t index, int64_t step, const torch::Tensor& param,
                         const torch::Tensor& grad) {
  torch::Tensor param_flat = param.view({-1});
  torch::Tensor grad_flat = grad.reshape({-1});
  const int64_t n = param_flat.numel();
  if (param.device().is_cpu()) {
    UpdateHostRange(rule, index, step, 0, param_flat, grad_flat.to(param.device()));
    return;
  }
  // Synchronous copies: a chunk's gradient comes down, the host updates it, the new parameter
  // values go back up before the staging buffers are reused.
  for (int64_t begin = 0; begin < n; begin += kStagingChunkElements) {
    const int64_t len = std::min(kStagingChunkElements, n - begin);
    torch::Tensor grad_host = StagingView(grad_staging_, grad.scalar_type(), len);
    grad_host.copy_(grad_flat.narrow(0, begin, len));
    torch::Tensor param_host = StagingView(param_staging_, param.scalar_type(), len);
    if (rule.ReadsParam()) param_host.copy_(param_flat.narrow(0, begin, len));
    UpdateHostRange(rule, index, step, begin, param_host, grad_host);
    param_flat.narrow(0, begin, len).copy_(param_host);
  }
}

void HostStepper::UpdateHostRange(UpdateRule& rule, size_t index, int64_t step, int64_t begin,
                                  const torch::Tensor& param_range,
                                  const torch::Tensor& grad_range) {
  const int64_t n = param_range.numel();
  const int64_t tasks = (n + kThreadTaskElements - 1) / kThreadTaskElements;
  // ATen ops inside a parallel region run single-threaded, so the threads split the tasks rather
  // than each op.
  at::parallel_for(0, tasks, /*grain_size=*/1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t offset = task * kThreadTaskElements;
      const int64_t len = std::min(kThreadTaskElements, n - offset);
      rule.UpdateRange(index, step, begin + offset, param_range.narrow(0, offset, len),
                       grad_range.narrow(0, offset, len));
    }
  });
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
  for (const torch::Tensor* t : {&param_staging_, &grad_staging_}) {
    if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
  }
  return bytes;
}

}  // namespace vramlab::worker::optim_internal
