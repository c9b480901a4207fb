#include "worker/optim/copy_stream.h"

#if defined(VRAMLAB_WITH_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace vramlab::worker::optim_internal {

#if defined(VRAMLAB_WITH_CUDA)

namespace {

using Event = at::cuda::CUDAEvent;

StreamMarker Record(const c10::cuda::CUDAStream& stream) {
  auto event = std::make_shared<Event>();
  event->record(stream);
  return StreamMarker(event);
}

Event* EventOf(const StreamMarker& marker) { return static_cast<Event*>(marker.event().get()); }

}  // namespace

CopyStream::CopyStream(const torch::Device& device) : device_(device) {
  if (device.is_cuda()) {
    stream_ = std::make_shared<c10::cuda::CUDAStream>(
        c10::cuda::getStreamFromPool(false, device.index()));
  }
}

StreamMarker CopyStream::MarkCompute() const {
  if (!stream_) return {};
  return Record(c10::cuda::getCurrentCUDAStream(device_.index()));
}

StreamMarker CopyStream::CopyAfter(const StreamMarker& after, const torch::Tensor& dst,
                                   const torch::Tensor& src) const {
  if (!stream_) {
    torch::Tensor out = dst;
    out.copy_(src);
    return {};
  }
  const auto& stream = *static_cast<const c10::cuda::CUDAStream*>(stream_.get());
  c10::cuda::CUDAGuard device_guard(device_.index());
  if (after.event()) EventOf(after)->block(stream);
  c10::cuda::CUDAStreamGuard stream_guard(stream);
  torch::Tensor out = dst;
  out.copy_(src, /*non_blocking=*/true);
  return Record(stream);
}

void CopyStream::HostWait(const StreamMarker& marker) {
  if (marker.event()) EventOf(marker)->synchronize();
}

void CopyStream::ComputeWaits(const StreamMarker& marker) const {
  if (marker.event()) EventOf(marker)->block(c10::cuda::getCurrentCUDAStream(device_.index()));
}

#else  // !VRAMLAB_WITH_CUDA: CPU tensors only; every copy is synchronous.

CopyStream::CopyStream(const torch::Device& device) : device_(device) {}

StreamMarker CopyStream::MarkCompute() const { return {}; }

StreamMarker CopyStream::CopyAfter(const StreamMarker& /*after*/, const torch::Tensor& dst,
                                   const torch::Tensor& src) const {
  torch::Tensor out = dst;
  out.copy_(src);
  return {};
}

void CopyStream::HostWait(const StreamMarker& /*marker*/) {}

void CopyStream::ComputeWaits(const StreamMarker& /*marker*/) const {}

#endif  // VRAMLAB_WITH_CUDA

}  // namespace vramlab::worker::optim_internal
