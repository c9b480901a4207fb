#include "worker/optim/offload_pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "worker/optim/host_stepper.h"

namespace vramlab::worker::optim_internal {

std::thread StartHostStepThread(std::function<void()> body, int* threads) {
  const int count = at::get_num_threads();
  *threads = count;
  return std::thread([body = std::move(body), count] {
    if (at::get_num_threads() != count) at::set_num_threads(count);
    torch::NoGradGuard no_grad;  // copies and updates of leaves, outside autograd
    body();
  });
}

OffloadPipeline::OffloadPipeline(UpdateRule& rule, const std::vector<torch::Tensor>& params,
                                 const StatePlacement& placement)
    : rule_(rule),
      params_(params),
      placement_(placement),
      copies_(params.at(0).device()),
      publishes_(params.at(0).device()),
      results_(params.size()),
      host_current_(params.size(), 0),
      published_(params.size(), 0),
      publish_done_(params.size()) {
  thread_ = StartHostStepThread([this] { Run(); }, &host_threads_);
}

OffloadPipeline::~OffloadPipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
  // Copies still in flight read the host buffers freed with this object.
  CopyStream::HostWait(last_publish_);
}

void OffloadPipeline::Enqueue(size_t index, const torch::Tensor& grad, int64_t step) {
  Item item{index, grad, step, copies_.MarkCompute()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
  }
  work_ready_.notify_one();
}

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void OffloadPipeline::Drain() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  StepTimes step;
  step.drain_wait_seconds = SecondsSince(start);
  step.arithmetic_seconds = arithmetic_seconds_ - arithmetic_drained_;
  step.copy_wait_seconds = copy_wait_seconds_ - copy_wait_drained_;
  arithmetic_drained_ = arithmetic_seconds_;
  copy_wait_drained_ = copy_wait_seconds_;
  times_.push_back(step);
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;
    std::rethrow_exception(error);
  }
}

void OffloadPipeline::Publish(const std::vector<size_t>& indices) {
  for (size_t i : indices) {
    if (!published_[i]) {
      last_publish_ = publish_done_[i] =
          publishes_.CopyAfter({}, params_[i].view({-1}), results_[i]);
    }
    published_[i] = 0;
    host_current_[i] = 1;
  }
  // Copies on one stream complete in order: the last marker covers them all.
  publishes_.ComputeWaits(last_publish_);
}

void OffloadPipeline::Forget(const std::vector<size_t>& indices) {
  for (size_t i : indices) host_current_[i] = 0;
}

std::vector<OffloadPipeline::StepTimes> OffloadPipeline::Times() const {
  std::lock_guard<std::mutex> lock(mu_);
  return times_;
}

int64_t OffloadPipeline::HostBytes() const {
  int64_t bytes = 0;
  for (const torch::Tensor& t : results_) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  for (const torch::Tensor& t : grad_slots_) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return bytes;
}

// Two chunks in flight: the copies of the next one are queued before the arithmetic of the pending
// one starts, so the copy engine and the host cores work at the same time, across parameters too.
void OffloadPipeline::Run() {
  std::optional<Chunk> pending;  // copies queued, arithmetic not yet run
  std::optional<Item> current;   // the item whose chunks are being issued
  int64_t next_begin = 0;
  int next_slot = 0;
  for (;;) {
    try {
      if (!current) {
        std::unique_lock<std::mutex> lock(mu_);
        if (!pending) {
          busy_ = false;
          idle_.notify_all();
          work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;  // stopping, nothing left
        }
        if (!queue_.empty()) {
          current = std::move(queue_.front());
          queue_.pop_front();
          busy_ = true;
          next_begin = 0;
        }
      }
      std::optional<Chunk> issued;
      if (current) {
        const int64_t n = params_[current->index].numel();
        Chunk chunk;
        chunk.item = *current;
        chunk.begin = next_begin;
        chunk.length = std::min(kStagingChunkElements, n - next_begin);
        chunk.slot = next_slot;
        next_slot ^= 1;
        IssueCopies(chunk);
        next_begin += chunk.length;
        if (next_begin >= n) current.reset();
        issued = std::move(chunk);
      }
      if (pending) Compute(*pending);
      pending = std::move(issued);
    } catch (...) {
      // The first error is Drain()'s to rethrow; the rest of this backward's work is dropped.
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      queue_.clear();
      pending.reset();
      current.reset();
    }
  }
}

void OffloadPipeline::IssueCopies(Chunk& chunk) {
  const size_t index = chunk.item.index;
  const torch::Tensor& param = params_[index];
  if (chunk.begin == 0) rule_.EnsureState(index, param, placement_);
  torch::Tensor result = ResultBuffer(index).narrow(0, chunk.begin, chunk.length);
  torch::Tensor grad_host = StagingView(grad_slots_[chunk.slot], chunk.item.grad.scalar_type(),
                                        chunk.length, placement_.pinned);
  chunk.copied =
      copies_.CopyAfter(chunk.item.ready, grad_host,
                        chunk.item.grad.reshape({-1}).narrow(0, chunk.begin, chunk.length));
  if (rule_.ReadsParam() && !host_current_[index]) {
    // Same stream, so after the gradient's copy; the parameter is not written before this
    // update is done. The last publish of the parameter may still be reading results_.
    CopyStream::HostWait(publish_done_[index]);
    chunk.copied =
        copies_.CopyAfter({}, result, param.view({-1}).narrow(0, chunk.begin, chunk.length));
  }
}

void OffloadPipeline::Compute(const Chunk& chunk) {
  const auto wait_start = std::chrono::steady_clock::now();
  CopyStream::HostWait(chunk.copied);
  const auto arithmetic_start = std::chrono::steady_clock::now();
  copy_wait_seconds_ += std::chrono::duration<double>(arithmetic_start - wait_start).count();
  const size_t index = chunk.item.index;
  // The new values overwrite results_[index]: the last copy of them to the device must be done.
  if (chunk.begin == 0) CopyStream::HostWait(publish_done_[index]);
  const torch::Tensor grad_host = grad_slots_[chunk.slot].narrow(0, 0, chunk.length);
  torch::Tensor& result = ResultBuffer(index);
  rule_.UpdateRange(index, chunk.item.step, chunk.begin,
                    result.narrow(0, chunk.begin, chunk.length), grad_host);
  arithmetic_seconds_ += SecondsSince(arithmetic_start);
  if (chunk.begin + chunk.length == params_[index].numel()) {
    // The whole parameter is updated, and the step no longer reads it after chunk.item.ready.
    last_publish_ = publish_done_[index] =
        publishes_.CopyAfter(chunk.item.ready, params_[index].view({-1}), result);
    published_[index] = 1;
  }
}

torch::Tensor& OffloadPipeline::ResultBuffer(size_t index) {
  torch::Tensor& buffer = results_[index];
  if (!buffer.defined()) {
    const torch::Tensor& param = params_[index];
    buffer = torch::empty(
        {param.numel()},
        torch::TensorOptions().dtype(param.scalar_type()).pinned_memory(placement_.pinned));
  }
  return buffer;
}

}  // namespace vramlab::worker::optim_internal
