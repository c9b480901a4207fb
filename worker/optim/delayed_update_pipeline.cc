#include "worker/optim/delayed_update_pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "worker/optim/host_stepper.h"

namespace vramlab::worker::optim_internal {

DelayedUpdatePipeline::DelayedUpdatePipeline(UpdateRule& rule,
                                             const std::vector<torch::Tensor>& params,
                                             const StatePlacement& placement)
    : rule_(rule),
      params_(params),
      placement_(placement),
      copies_(params.at(0).device()),
      publishes_(params.at(0).device()),
      held_(params.size()),
      updating_(params.size(), 0),
      unpublished_(params.size(), 0),
      host_grads_(params.size()),
      results_(params.size()),
      queued_step_(params.size(), 0),
      grad_copied_(params.size()),
      result_copied_(params.size()),
      host_current_(params.size(), 0) {
  thread_ = StartHostStepThread([this] { Run(); }, &host_threads_);
}

DelayedUpdatePipeline::~DelayedUpdatePipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
  // The thread is gone: what it issued may still be on the side stream, reading device gradients
  // and host buffers that are freed below.
  for (const auto& [item, copied] : in_flight_) CopyStream::HostWait(copied);
  for (const StreamMarker& marker : result_copied_) CopyStream::HostWait(marker);
}

void DelayedUpdatePipeline::Enqueue(size_t index, const torch::Tensor& grad, int64_t step) {
  torch::Tensor& buffer = host_grads_[index];
  if (!buffer.defined()) {
    buffer = torch::empty(
        {grad.numel()},
        torch::TensorOptions().dtype(grad.scalar_type()).pinned_memory(placement_.pinned));
  }
  queued_step_[index] = step;
  Item item{index, grad, copies_.MarkCompute()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (updating_[index]) {
      held_[index] = std::move(item);
      return;  // released to copy_queue_ when the update is done with the parameter
    }
    copy_queue_.push_back(std::move(item));
  }
  work_ready_.notify_one();
}

std::vector<size_t> DelayedUpdatePipeline::WaitForUpdate() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return copy_queue_.empty() && update_queue_.empty() && !busy_; });
  // Every copy is issued; once complete, the device gradients are the caller's alone again.
  for (const auto& [item, copied] : in_flight_) CopyStream::HostWait(copied);
  in_flight_.clear();
  std::vector<size_t> done = std::move(started_);
  started_.clear();
  if (!done.empty()) {
    StepTimes times;
    times.drain_wait_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.arithmetic_seconds = arithmetic_seconds_ - arithmetic_drained_;
    times.copy_wait_seconds = copy_wait_seconds_ - copy_wait_drained_;
    times_.push_back(times);
  }
  arithmetic_drained_ = arithmetic_seconds_;
  copy_wait_drained_ = copy_wait_seconds_;
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;
    std::rethrow_exception(error);
  }
  return done;
}

void DelayedUpdatePipeline::Publish(const std::vector<size_t>& indices) {
  std::lock_guard<std::mutex> lock(mu_);  // the thread is idle: orders what it wrote before
  // Behind everything the compute stream queued so far: the backward that read the old values.
  StreamMarker after = publishes_.MarkCompute();
  for (size_t i : indices) {
    if (unpublished_[i]) {
      last_publish_ = result_copied_[i] =
          publishes_.CopyAfter(after, params_[i].view({-1}), results_[i]);
      after = StreamMarker();  // one stream: the later copies follow the first
      unpublished_[i] = 0;
    }
    host_current_[i] = 1;
  }
  // Copies on one stream complete in order: the last marker covers the ones of backward too.
  publishes_.ComputeWaits(last_publish_);
}

void DelayedUpdatePipeline::Start(const std::vector<size_t>& indices) {
  if (indices.empty()) return;
  std::vector<Work> work;
  for (size_t i : indices) {
    const torch::Tensor& param = params_[i];
    if (!results_[i].defined()) {
      results_[i] = torch::empty(
          {param.numel()},
          torch::TensorOptions().dtype(param.scalar_type()).pinned_memory(placement_.pinned));
    }
    if (rule_.ReadsParam() && !host_current_[i]) {
      result_copied_[i] = copies_.CopyAfter(copies_.MarkCompute(), results_[i], param.view({-1}));
    }
    // After this update results_[i] holds the value the parameter gets when it is published.
    host_current_[i] = 1;
    work.push_back({i, queued_step_[i]});
  }
  // Largest parameters first: what the next Step() waits for after the arithmetic is the last
  // parameters' write-back and their next gradient's copy, so these should be the smallest (in
  // backward's order a tied embedding, the largest tensor, came last). The order changes no value.
  std::stable_sort(work.begin(), work.end(), [this](const Work& a, const Work& b) {
    return params_[a.index].numel() > params_[b.index].numel();
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Work& w : work) {
      updating_[w.index] = 1;
      unpublished_[w.index] = 1;
      update_queue_.push_back(w);
    }
    started_ = indices;
  }
  work_ready_.notify_one();
}

void DelayedUpdatePipeline::Forget(const std::vector<size_t>& indices) {
  for (size_t i : indices) host_current_[i] = 0;
}

int64_t DelayedUpdatePipeline::HostBytes() const {
  int64_t bytes = 0;
  for (const auto* buffers : {&results_, &host_grads_}) {
    for (const torch::Tensor& t : *buffers) {
      if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  return bytes;
}

std::vector<DelayedUpdatePipeline::StepTimes> DelayedUpdatePipeline::Times() const {
  std::lock_guard<std::mutex> lock(mu_);
  return times_;
}

// Copies first (issuing one costs the host next to nothing and lets backward's gradients move
// while the host computes), then the started update, one parameter at a time, largest first
// (Start).
void DelayedUpdatePipeline::Run() {
  for (;;) {
    std::optional<Item> copy;
    std::optional<Work> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      busy_ = false;
      idle_.notify_all();
      work_ready_.wait(
          lock, [this] { return stopping_ || !copy_queue_.empty() || !update_queue_.empty(); });
      if (stopping_) return;
      busy_ = true;
      if (!copy_queue_.empty()) {
        copy = std::move(copy_queue_.front());
        copy_queue_.pop_front();
      } else {
        work = update_queue_.front();
        update_queue_.pop_front();
      }
    }
    try {
      if (copy) IssueCopy(std::move(*copy));
      if (work) Compute(*work);
    } catch (...) {
      // The first error is WaitForUpdate()'s to rethrow; the rest of this update is dropped.
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      update_queue_.clear();
      std::fill(updating_.begin(), updating_.end(), 0);
      // Nothing more of a failed update reaches the device, as Publish() is not called after it.
      std::fill(unpublished_.begin(), unpublished_.end(), 0);
      for (std::optional<Item>& held : held_) {
        if (held) copy_queue_.push_back(std::move(*held));
        held.reset();
      }
      continue;
    }
    if (work) {
      std::lock_guard<std::mutex> lock(mu_);
      updating_[work->index] = 0;
      std::optional<Item>& held = held_[work->index];
      if (held) {
        copy_queue_.push_back(std::move(*held));
        held.reset();
      }
    }
  }
}

void DelayedUpdatePipeline::IssueCopy(Item item) {
  const size_t index = item.index;
  StreamMarker copied = copies_.CopyAfter(item.ready, host_grads_[index], item.grad.reshape({-1}));
  grad_copied_[index] = copied;
  std::lock_guard<std::mutex> lock(mu_);
  // An item is queued only once no update is running on its parameter (held_ otherwise), so an
  // unpublished parameter's update is done: publish it behind the gradient's completion.
  if (unpublished_[index]) {
    last_publish_ = result_copied_[index] =
        publishes_.CopyAfter(item.ready, params_[index].view({-1}), results_[index]);
    unpublished_[index] = 0;
  }
  in_flight_.emplace_back(std::move(item), std::move(copied));
}

void DelayedUpdatePipeline::IssueReadyCopies() {
  for (;;) {
    std::optional<Item> copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (copy_queue_.empty()) return;
      copy = std::move(copy_queue_.front());
      copy_queue_.pop_front();
    }
    IssueCopy(std::move(*copy));
  }
}

void DelayedUpdatePipeline::Compute(const Work& work) {
  const size_t index = work.index;
  const auto wait_start = std::chrono::steady_clock::now();
  CopyStream::HostWait(grad_copied_[index]);    // this update's gradient is in host memory
  CopyStream::HostWait(result_copied_[index]);  // the last publish no longer reads results_
  auto arithmetic_start = std::chrono::steady_clock::now();
  copy_wait_seconds_ += std::chrono::duration<double>(arithmetic_start - wait_start).count();
  const torch::Tensor& result = results_[index];
  const torch::Tensor& grad = host_grads_[index];
  const int64_t n = result.numel();
  for (int64_t begin = 0; begin < n; begin += kStagingChunkElements) {
    const int64_t length = std::min(kStagingChunkElements, n - begin);
    rule_.UpdateRange(index, work.step, begin, result.narrow(0, begin, length),
                      grad.narrow(0, begin, length));
    if (begin + length < n) {
      arithmetic_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - arithmetic_start)
              .count();
      IssueReadyCopies();
      arithmetic_start = std::chrono::steady_clock::now();
    }
  }
  arithmetic_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - arithmetic_start).count();
}

}  // namespace vramlab::worker::optim_internal
