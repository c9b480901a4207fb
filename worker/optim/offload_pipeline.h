// The overlapped host step of offloaded optimizer state (offload_to_cpu, not in_backward): while
// backward still runs, each parameter whose gradient is complete has its gradient (and, where the
// rule reads it, its current value) copied to host memory on a side stream, and one host thread
// runs the rule on it chunk by chunk, the copy of the next chunk overlapping the arithmetic of this
// one. The new values of a parameter go back to the device as soon as its update is done, on a
// second side stream (the other direction of the host link), queued behind the point of the
// compute stream where its gradient was complete: from there on nothing in the step reads the
// parameter (autograd runs a leaf's AccumulateGrad after every node that used its value, and the
// pipeline takes only the gradient of a step's last micro-batch), so the step computes what the
// synchronous one computes while the copies overlap the arithmetic of the later parameters.
// Publish(), which the optimizer's Step() calls, copies what is left and makes the compute stream
// wait for every copy, so the next forward reads the new values. A step that ends without Step()
// (an error in backward) leaves the parameters that were done updated and the others not.
//
// The CUDA specifics (side stream, events) are in copy_stream.h; on CPU parameters the same order
// runs with synchronous copies, which is how the tests check it.
//
// Thread-safety: Enqueue from the thread that runs backward; Drain and Publish from the thread that
// owns the optimizer, never concurrently with Enqueue. The rule is used only by the pipeline's
// thread between the first Enqueue and Drain.
#ifndef VRAMLAB_WORKER_OPTIM_OFFLOAD_PIPELINE_H_
#define VRAMLAB_WORKER_OPTIM_OFFLOAD_PIPELINE_H_

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/optim/copy_stream.h"
#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {

// Starts a pipeline's host thread, which runs `body` outside autograd with as many intra-op
// threads as the calling thread has (returned in `*threads`): with LibTorch's OpenMP backend the
// count is per thread, and a fresh thread starts from OpenMP's default. (The native backend's count
// is global, so the two agree and nothing is set.)
std::thread StartHostStepThread(std::function<void()> body, int* threads);

class OffloadPipeline {
 public:
  // `params`: the optimizer's parameters, all on one device; `rule` keeps its state in `placement`
  // (host memory). Starts the host thread.
  OffloadPipeline(UpdateRule& rule, const std::vector<torch::Tensor>& params,
                  const StatePlacement& placement);
  // Waits for queued work and stops the thread.
  ~OffloadPipeline();
  OffloadPipeline(const OffloadPipeline&) = delete;
  OffloadPipeline& operator=(const OffloadPipeline&) = delete;

  // Queues the update of params[index] from `grad` (its complete gradient, produced on the calling
  // thread's current stream) at 1-based `step`.
  void Enqueue(size_t index, const torch::Tensor& grad, int64_t step);
  // Blocks until every queued update has run on the host; rethrows the first error of the thread.
  void Drain();
  // Copies the new values of params[i] for every i in `indices` (each updated since the last
  // Publish) into the parameters, where the update did not already; the compute stream waits for
  // every copy, these and the ones issued during backward.
  void Publish(const std::vector<size_t>& indices);
  // The device values of params[i], i in `indices`, were written other than by Publish (the
  // synchronous step): their next update copies them from the device again.
  void Forget(const std::vector<size_t>& indices);

  // Bytes of the host buffers: one per updated parameter (parameter dtype) and two gradient
  // staging chunks.
  int64_t HostBytes() const;

  // Where the host's time went in one optimizer step (one Drain()).
  struct StepTimes {
    double arithmetic_seconds = 0;  // the rule's updates on host chunks
    double copy_wait_seconds = 0;   // waiting for a chunk's copies to the host
    double drain_wait_seconds = 0;  // Drain() blocked: host work left after backward ended
  };
  // One entry per Drain() so far, in order. Read between a Drain() and the next Enqueue().
  std::vector<StepTimes> Times() const;

  // The threads the host loops of this pipeline split an update into.
  int HostThreads() const { return host_threads_; }

 private:
  struct Item {
    size_t index;
    torch::Tensor grad;
    int64_t step;
    StreamMarker ready;  // the gradient is complete on the device
  };
  // One staging chunk in flight: its copies to the host are queued.
  struct Chunk {
    Item item;
    int64_t begin = 0, length = 0;
    int slot = 0;
    StreamMarker copied;
  };

  void Run();
  // Queues the copies of `chunk` into its slot and the parameter's buffer.
  void IssueCopies(Chunk& chunk);
  // Waits for the chunk's copies and runs the rule on it; after the parameter's last chunk, queues
  // the copy of its new values to the device.
  void Compute(const Chunk& chunk);
  torch::Tensor& ResultBuffer(size_t index);

  UpdateRule& rule_;
  const std::vector<torch::Tensor> params_;
  const StatePlacement placement_;
  const CopyStream copies_;     // to the host: gradients, parameters
  const CopyStream publishes_;  // to the device: new parameter values

  mutable std::mutex mu_;
  std::condition_variable work_ready_, idle_;
  std::deque<Item> queue_;        // guarded by mu_
  bool busy_ = false;             // guarded by mu_: the thread holds work taken from queue_
  bool stopping_ = false;         // guarded by mu_
  std::exception_ptr error_;      // guarded by mu_
  int host_threads_ = 1;          // set before the thread starts, constant after
  std::vector<StepTimes> times_;  // guarded by mu_
  // Written by the thread only, summed over every chunk since construction; read by Drain()
  // once the thread is idle (ordered by mu_).
  double arithmetic_seconds_ = 0, copy_wait_seconds_ = 0;
  double arithmetic_drained_ = 0,
         copy_wait_drained_ = 0;  // guarded by mu_: the sums at the last Drain()

  // Owned by the thread between Enqueue and Drain, by the caller otherwise.
  std::vector<torch::Tensor> results_;  // results_[i]: new values of params_[i], host memory
  // host_current_[i]: results_[i] holds what params_[i] holds on the device (it was published
  // and nothing has written the parameter since), so an update reads the parameter from there
  // instead of copying it from the device: a rule that reads parameters (bf16 state) then moves
  // only the gradient to the host, not the gradient and the parameter.
  std::vector<char> host_current_;
  // published_[i]: params_[i] was copied from results_[i] since the last Publish();
  // publish_done_[i]: where that copy completes (results_[i] may be written again once it is
  // reached); last_publish_: the last copy queued on publishes_, which completes after all earlier
  // ones.
  std::vector<char> published_;
  std::vector<StreamMarker> publish_done_;
  StreamMarker last_publish_;
  torch::Tensor grad_slots_[2];
  std::thread thread_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_OFFLOAD_PIPELINE_H_
