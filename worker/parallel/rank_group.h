// One rank's membership in a parallel run: the c10d process group of the LibTorch the worker is
// built with (ProcessGroupGloo on the CPU, ProcessGroupNCCL on CUDA), joined through a TCPStore
// that rank 0 hosts at the rendezvous address. No collective is implemented here: each call is
// one c10d collective per tensor, launched together and waited for together (the Start* calls
// return them still running, as a PendingCollective).
//
// Every rank must make the same calls in the same order with tensors of the same shapes and
// dtypes (c10d's contract); a rank that stops calling leaves the others waiting until the
// process group's timeout.
#ifndef VRAMLAB_WORKER_PARALLEL_RANK_GROUP_H_
#define VRAMLAB_WORKER_PARALLEL_RANK_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

// The command-line flags that make a worker process one rank (--rank R --rendezvous HOST:PORT).
struct RankFlags {
  int32_t rank = -1;  // -1: not given (a single-process run)
  std::string rendezvous;

  bool given() const { return rank >= 0 || !rendezvous.empty(); }
};

struct RendezvousAddress {
  std::string host;
  uint16_t port = 0;
};

// "HOST:PORT" (the last colon splits; PORT in [1, 65535]; "[::1]:PORT" gives host ::1). Throws
// std::invalid_argument.
RendezvousAddress ParseRendezvous(const std::string& text);

// The flags against the spec: a spec with parallel.world_size >= 2 needs --rank in
// [0, world_size) and --rendezvous; a single-process spec takes neither. Throws SpecError naming
// parallel.world_size.
void CheckRankFlags(const ParallelSpec& parallel, const RankFlags& flags);

// A tensor and the rank that roots its collective (reduce's destination, broadcast's source).
using RootedTensor = std::pair<torch::Tensor, int>;

// Collectives that have been issued and are not yet known to be complete: c10d's Work objects,
// and the copies that finish them. Until Wait() returns it holds every tensor the collectives
// read or write (and the process group's staging of them), so a caller may drop its own
// references at once (a gradient handed to its reduce-scatter) without the memory being freed,
// or reused by the allocator, under a running collective. The caller must neither read nor write
// those tensors before Wait().
//
// Wait() completes them. Gloo: it blocks until the collectives have run on the process group's
// threads. NCCL: the calling thread's current CUDA stream is made to wait for the collectives'
// stream and the CPU does not block; any later work on that stream, an allocation that reuses
// memory freed after Wait() included, is ordered after the collectives (ProcessGroupNCCL also
// records its tensors on its own stream with the caching allocator). Then the finishing copies
// run (Gloo's reduce-scatter takes the rank's chunk out of the all-reduced tensor), and the tensors
// are released. A second Wait() does nothing. Destroying one that was not waited for waits first,
// dropping any error: only an exception's unwinding (an out-of-memory) gets there, and memory the
// collectives use must not be freed under them even then.
class PendingCollective {
 public:
  virtual ~PendingCollective();
  virtual void Wait() = 0;
};

class RankGroup {
 public:
  virtual ~RankGroup();

  // Joins the group: blocks until all `world_size` ranks have reached the store (rank 0 hosts
  // it). `cuda`: the ranks' tensors live on CUDA (NCCL); otherwise on the CPU (Gloo). Throws
  // SpecError (parallel.world_size) when this worker was built without that backend, and
  // c10::Error / std::runtime_error when the rendezvous fails.
  static std::unique_ptr<RankGroup> Join(const RankFlags& flags, int world_size, bool cuda);

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;  // "gloo" or "nccl"

  // Each tensor becomes the element-wise sum of its copies on all ranks.
  virtual void AllReduceSum(const std::vector<torch::Tensor>& tensors) = 0;
  // Each tensor becomes the sum of its copies on its root rank; other ranks' copies are
  // unspecified.
  virtual void ReduceSum(const std::vector<RootedTensor>& tensors) = 0;
  // The two above, issued and not waited for: the results exist once the returned
  // PendingCollective's Wait() has returned (data parallel's gradients during backward,
  // gradient_reduction.h). In place; on Gloo a bfloat16 tensor travels as a float32 copy that
  // Wait() copies back.
  virtual std::unique_ptr<PendingCollective> StartAllReduceSum(
      const std::vector<torch::Tensor>& tensors) = 0;
  virtual std::unique_ptr<PendingCollective> StartReduceSum(
      const std::vector<RootedTensor>& tensors) = 0;
  // Each tensor becomes its root rank's copy on every rank.
  virtual void Broadcast(const std::vector<RootedTensor>& tensors) = 0;
  // SHARD_FULL's collectives, over pairs of a padded full tensor and this rank's chunk of it:
  // `full` is contiguous with world_size() * chunk.numel() elements, `chunk` contiguous, both of
  // one dtype and device. One collective per pair, all issued before these return; the results
  // exist once the returned PendingCollective's Wait() has returned.
  //
  // AllGather: each `full` becomes the concatenation of every rank's `chunk` in rank order.
  // NCCL: _allgather_base into `full`. Gloo: allgather into views of `full` (its process group
  // stages the result in a flat buffer of full's size first); bfloat16 travels bit for bit as
  // float16, a copy needing no arithmetic.
  virtual std::unique_ptr<PendingCollective> StartAllGather(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) = 0;
  // ReduceScatterSum: each `chunk` becomes this rank's chunk of the sum over ranks of `full`;
  // `full` is left unspecified. NCCL: _reduce_scatter_base. Gloo, which has no reduce-scatter in
  // LibTorch 1.13: `full` is all-reduced in place (as AllReduceSum, so bfloat16 through a float32
  // copy) and, in Wait(), the rank's chunk copied out: twice a reduce-scatter's traffic.
  virtual std::unique_ptr<PendingCollective> StartReduceScatterSum(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) = 0;
  // The mean over ranks of a value each rank computed (one all-reduce of a float64 scalar).
  virtual double MeanOverRanks(double value) = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_RANK_GROUP_H_
