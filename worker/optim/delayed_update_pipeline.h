// The offloaded host step one optimizer step late (OptimizerOptions::delayed_update; the delayed
// parameter update of ZeRO-Offload). During the announced backward of step t, each complete
// gradient is copied on the side stream into a pinned host buffer of its own parameter, so the
// device gradients can be freed after Step() as usual. Step() t waits for update t-1 (the host
// arithmetic on step t-1's gradients), publishes what is left of it to the device parameters and
// starts update t, which runs on this pipeline's thread while the caller runs step t+1's forward
// and backward. So step t+1's gradients are computed at the parameters after update t-1. Update t's
// new values of a parameter go to the device as soon as both its update is done and step t+1's
// gradient of it is complete (from there on step t+1 no longer reads it: autograd runs a leaf's
// AccumulateGrad after every node that used its value), on a second side stream, the other
// direction of the host link; so the copies overlap the rest of the arithmetic, and Step() t+1
// copies only the parameters that got no gradient in step t+1.
//
// The buffers are each shared by two users, ordered as follows:
// - host_grads_[i]: written by the copy of step t's gradient, read by update t-1's arithmetic.
//   The copy is queued only once update t-1 is done with parameter i (it is held back until then),
//   and update t waits for the copy's marker.
// - results_[i]: the new values; read by the publish copy (and first written by a copy of the
//   device parameter), written by the next update's arithmetic, which first waits for the marker
//   of the parameter's last copy of results_[i].
// - params[i] on the device: written only by publish copies, queued on the publish stream behind
//   the point of the compute stream where step t+1's gradient of i was complete (or, in Publish(),
//   behind all of the compute stream's queued work); Publish() makes the compute stream wait for
//   every publish copy.
//
// The CUDA specifics (side stream, events) are in copy_stream.h; on CPU parameters the same order
// runs with synchronous copies, which is how the tests check it.
//
// Thread-safety: Enqueue from the thread that runs backward, never concurrently with the other
// calls, which come from the thread that owns the optimizer. The rule's UpdateRange is called only
// by the pipeline's thread, between Start() and the next WaitForUpdate(); the rule's state must
// exist before Start() (EnsureState on the caller's thread), so that StateBytes() may be read
// while an update runs.
#ifndef VRAMLAB_WORKER_OPTIM_DELAYED_UPDATE_PIPELINE_H_
#define VRAMLAB_WORKER_OPTIM_DELAYED_UPDATE_PIPELINE_H_

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "worker/optim/copy_stream.h"
#include "worker/optim/offload_pipeline.h"
#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {

class DelayedUpdatePipeline {
 public:
  using StepTimes = OffloadPipeline::StepTimes;

  // `params`: the optimizer's parameters, all on one device; `rule` keeps its state in `placement`
  // (host memory). Starts the host thread.
  DelayedUpdatePipeline(UpdateRule& rule, const std::vector<torch::Tensor>& params,
                        const StatePlacement& placement);
  // Finishes the chunk in progress, drops the rest of an unfinished update, waits for the copies
  // in flight and stops the thread.
  ~DelayedUpdatePipeline();
  DelayedUpdatePipeline(const DelayedUpdatePipeline&) = delete;
  DelayedUpdatePipeline& operator=(const DelayedUpdatePipeline&) = delete;

  // Queues the copy of `grad` (the complete gradient of params[index], produced on the calling
  // thread's current stream) into the parameter's host gradient buffer; it runs once the update in
  // flight, if any, is done with params[index]. `step`: the 1-based update it is for.
  void Enqueue(size_t index, const torch::Tensor& grad, int64_t step);
  // Blocks until the update of the last Start() has run and every gradient queued since has
  // reached host memory (the pipeline then holds no device gradient); rethrows the first error of
  // the thread. Returns the parameters that update wrote (empty if none was started), which the
  // caller publishes next.
  std::vector<size_t> WaitForUpdate();
  // Copies the new values of params[i], i in `indices` (as WaitForUpdate returned them), into the
  // parameters behind the compute stream's queued work, where they were not copied during
  // backward; the compute stream waits for every publish copy.
  void Publish(const std::vector<size_t>& indices);
  // Starts the update of params[i] for every i in `indices` (each Enqueued since the last Start,
  // its state existing) from its host gradient, largest parameter first; returns at once. Only
  // after WaitForUpdate and Publish of the previous update.
  void Start(const std::vector<size_t>& indices);
  // The device values of params[i], i in `indices`, were written other than by Publish (the
  // synchronous step): their next update copies them from the device again.
  void Forget(const std::vector<size_t>& indices);

  // Bytes of the host buffers: per parameter that was queued, its new values (parameter dtype) and
  // its gradient (gradient dtype).
  int64_t HostBytes() const;
  // One entry per update that WaitForUpdate() completed, in order; drain_wait_seconds is the time
  // that call blocked (the host work the next step's forward and backward did not hide). Read
  // between WaitForUpdate() and the next Start().
  std::vector<StepTimes> Times() const;
  // The threads the host loops of this pipeline split an update into.
  int HostThreads() const { return host_threads_; }

 private:
  struct Item {
    size_t index;
    torch::Tensor grad;  // the device gradient, referenced until its copy completed
    StreamMarker ready;  // the gradient is complete on the device
  };
  struct Work {
    size_t index;
    int64_t step;
  };

  void Run();
  // Queues the copy of `item` into its host buffer; records the marker and keeps the item (its
  // gradient alive) in in_flight_. If the parameter's update is done and not yet published,
  // queues its publish copy behind item.ready.
  void IssueCopy(Item item);
  // Issues every copy in copy_queue_ (between chunks of an update, so backward is not held up).
  void IssueReadyCopies();
  // Waits for the parameter's copies, then runs the rule on all of it, chunk by chunk.
  void Compute(const Work& work);

  UpdateRule& rule_;
  const std::vector<torch::Tensor> params_;
  const StatePlacement placement_;
  const CopyStream copies_;     // to the host: gradients, parameters
  const CopyStream publishes_;  // to the device: new parameter values
  int host_threads_ = 1;        // set before the thread starts, constant after

  mutable std::mutex mu_;
  std::condition_variable work_ready_, idle_;
  std::deque<Item> copy_queue_;            // guarded by mu_: copies that may be issued now
  std::vector<std::optional<Item>> held_;  // guarded by mu_: held_[i] waits for update of i
  std::deque<Work> update_queue_;          // guarded by mu_: the started update's parameters
  std::vector<char> updating_;             // guarded by mu_: i is in update_queue_ or computing
  std::vector<std::pair<Item, StreamMarker>> in_flight_;  // guarded by mu_: issued copies
  bool busy_ = false;            // guarded by mu_: the thread holds work taken from a queue
  bool stopping_ = false;        // guarded by mu_
  std::exception_ptr error_;     // guarded by mu_
  std::vector<size_t> started_;  // guarded by mu_: the indices of the last Start()
  std::vector<char>
      unpublished_;            // guarded by mu_: i's last update is done or running, not published
  StreamMarker last_publish_;  // guarded by mu_: the last copy queued on publishes_
  std::vector<StepTimes> times_;  // guarded by mu_
  // Written by the thread only, summed over every update; read by WaitForUpdate() once the thread
  // is idle (ordered by mu_).
  double arithmetic_seconds_ = 0, copy_wait_seconds_ = 0;
  double arithmetic_drained_ = 0, copy_wait_drained_ = 0;  // the caller's: sums at the last wait

  // Per parameter. The handles are set on the caller's threads only (host_grads_ by Enqueue,
  // results_ by Start), the contents written as the comment at the top says.
  std::vector<torch::Tensor> host_grads_;  // flat, gradient dtype, host memory
  std::vector<torch::Tensor> results_;     // flat, parameter dtype, host memory
  std::vector<int64_t> queued_step_;       // written by Enqueue, read by Start
  std::vector<StreamMarker> grad_copied_;  // the thread's: completion of the last gradient copy
  // The last copy that reads or writes results_[i] (a publish, or the parameter's copy to the
  // host): written by the caller (Start, Publish) and by the thread (IssueCopy), never at once: the
  // thread writes i's only after update i is done, and the caller only while the thread is idle.
  std::vector<StreamMarker> result_copied_;
  // host_current_[i] (the caller's): results_[i] holds the value the device parameter will hold
  // once published, so the next update starts from there without a copy from the device.
  std::vector<char> host_current_;
  std::thread thread_;
};

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_DELAYED_UPDATE_PIPELINE_H_
