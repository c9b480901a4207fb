// The allocation/free sequence a planner writes (step_allocations.h's AllocationEvent), with the
// phase, step and micro-step each event happens in. Ids are handed out in order and never reused;
// a request of 0 bytes or less allocates nothing and gets the id -1, which every free ignores, so
// a planner can name tensors that a mode does not have (an fp32 copy of an fp32 tensor) without
// branching. Not thread-safe: one planner writes one log.
#ifndef VRAMLAB_SERVER_ESTIMATE_ALLOCATION_LOG_H_
#define VRAMLAB_SERVER_ESTIMATE_ALLOCATION_LOG_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "server/estimate/device_model.h"
#include "server/estimate/step_allocations.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server::estimate {

// The cuBLAS workspace of a thread's first matmul, kept (device_model.h): the training thread's
// in the first forward, autograd's device thread's in the first backward.
enum BlasThread { kForwardThread, kBackwardThread };

class AllocationLog {
 public:
  explicit AllocationLog(Device device) : device_(device) {}

  // Where the events written next happen.
  void At(vramlab::v1::Phase phase) { phase_ = phase; }
  void At(int32_t step, int32_t micro_step) { step_ = step, micro_ = micro_step; }
  int32_t step() const { return step_; }

  // Allocates `bytes`; returns the tensor's id (-1 for nothing).
  int64_t A(int64_t bytes) {
    const int64_t id = next_id_++;
    if (bytes <= 0) return -1;
    events_.push_back({AllocationEvent::kAlloc, id, bytes, phase_, step_, micro_});
    bytes_of_.resize(static_cast<size_t>(next_id_), 0);
    bytes_of_[static_cast<size_t>(id)] = bytes;
    return id;
  }
  // Frees tensor `id` (nothing for -1).
  void F(int64_t id) {
    if (id < 0) return;
    events_.push_back({AllocationEvent::kFree, id, 0, phase_, step_, micro_});
  }
  void FreeAll(std::vector<int64_t>* ids) {
    for (int64_t id : *ids) F(id);
    ids->clear();
  }
  // The saved tensor at `place` of `part`, freed by the node that saved it (-1 left there).
  void Drop(std::vector<int64_t>* part, int place) {
    F((*part)[place]);
    (*part)[place] = -1;
  }
  // A transient of `bytes`: allocated and freed at once.
  void T(int64_t bytes) { F(A(bytes)); }

  // The workspace of `thread`, the first time it runs a matmul on CUDA: up to
  // kCudaBlasWorkspaceThreads of them, kept to the end.
  void BlasWorkspace(BlasThread thread) {
    if (device_ != Device::kCuda || thread >= kCudaBlasWorkspaceThreads || workspaces_[thread]) {
      return;
    }
    A(kCudaBlasWorkspaceBytes);
    workspaces_[thread] = true;
  }

  // The request of tensor `id` (0 for -1 or an id not allocated).
  int64_t BytesOf(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(bytes_of_.size())) return 0;
    return bytes_of_[static_cast<size_t>(id)];
  }

  std::vector<AllocationEvent> TakeEvents() { return std::move(events_); }

 private:
  const Device device_;
  std::vector<AllocationEvent> events_;
  std::vector<int64_t> bytes_of_;  // by id: the request, 0 for none
  int64_t next_id_ = 1;
  bool workspaces_[2] = {false, false};  // by BlasThread
  vramlab::v1::Phase phase_ = vramlab::v1::LOAD;
  int32_t step_ = 0, micro_ = 0;
};

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ALLOCATION_LOG_H_
