// The CUDA side of overlapped offload, in one place: copies between a CUDA device and pinned host
// memory on a side stream, ordered against the compute stream with events. For CPU parameters
// every copy is synchronous and every marker is already reached, so the driver that uses this
// (offload_pipeline.h) runs the same order of operations on the CPU, where the tests check it.
// Internal to worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_COPY_STREAM_H_
#define VRAMLAB_WORKER_OPTIM_COPY_STREAM_H_

#include <torch/torch.h>

#include <memory>

namespace vramlab::worker::optim_internal {

// A point in one stream's queued work (a recorded CUDA event); empty on the CPU.
class StreamMarker {
 public:
  StreamMarker() = default;
  explicit StreamMarker(std::shared_ptr<void> event) : event_(std::move(event)) {}
  const std::shared_ptr<void>& event() const { return event_; }

 private:
  std::shared_ptr<void> event_;
};

class CopyStream {
 public:
  // A side stream of `device` from the pool (CUDA); nothing for the CPU.
  explicit CopyStream(const torch::Device& device);

  // Marks the work queued so far on the calling thread's current stream of the device: where a
  // gradient was produced (called from the gradient hook).
  StreamMarker MarkCompute() const;
  // Copies `src` into `dst` (same size) on the side stream after `after` is reached, without
  // blocking the host; returns the marker of the copy's completion.
  StreamMarker CopyAfter(const StreamMarker& after, const torch::Tensor& dst,
                         const torch::Tensor& src) const;
  // Blocks the host until `marker` is reached.
  static void HostWait(const StreamMarker& marker);
  // Makes the current stream wait (on the device, not the host) for `marker`.
  void ComputeWaits(const StreamMarker& marker) const;

 private:
  torch::Device device_;
  std::shared_ptr<void> stream_;  // c10::cuda::CUDAStream on CUDA
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_COPY_STREAM_H_
