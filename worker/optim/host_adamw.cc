#include "worker/optim/host_adamw.h"

#include "worker/optim/host_adamw_loops.h"
#include "worker/optim/host_thread_pool.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

// Elements per task of the host loops: below this another thread costs more than it saves, and a
// 16 Mi-element staging chunk still splits into 64 tasks, several per thread, which the threads
// take as they finish (host_thread_pool.h) so that one thread without its core does not hold up
// the chunk.
constexpr int64_t kElementsPerTask = int64_t{1} << 18;

// Runs body(begin, end) over [0, n) in tasks of kElementsPerTask elements (the last shorter), on
// the calling thread and up to LibTorch's intra-op thread count of the persistent host threads.
template <typename Body>
void ParallelRanges(int64_t n, const Body& body) {
  const int64_t tasks = std::max<int64_t>(1, (n + kElementsPerTask - 1) / kElementsPerTask);
  const int workers =
      static_cast<int>(std::min<int64_t>(tasks, std::max(1, at::get_num_threads())));
  RunOnHostThreads(workers, static_cast<int>(tasks), [&body, n](int t) {
    const int64_t begin = t * kElementsPerTask, end = std::min(n, begin + kElementsPerTask);
    body(begin, end);
  });
}

bool ContiguousCpu(const torch::Tensor& t, torch::ScalarType dtype, int64_t numel) {
  return t.device().is_cpu() && t.scalar_type() == dtype && t.is_contiguous() && t.numel() == numel;
}

template <typename T>
T* Data(const torch::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace

bool HostAdamWSupported(const torch::Tensor& param, const torch::Tensor& grad,
                        const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  const torch::ScalarType dtype = param.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) return false;
  const int64_t n = param.numel();
  for (const torch::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!ContiguousCpu(*t, dtype, n)) return false;
  }
  return true;
}

void HostAdamW(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
               const torch::Tensor& grad, const torch::Tensor& exp_avg,
               const torch::Tensor& exp_avg_sq) {
  if (!HostAdamWSupported(param, grad, exp_avg, exp_avg_sq)) {
    throw std::invalid_argument(
        "HostAdamW needs contiguous CPU tensors of one dtype, float or bf16");
  }
  const AdamWFloatScalars c = FloatScalarsAt(hyper, step);
  if (param.scalar_type() == torch::kFloat) {
    float *p = Data<float>(param), *g = Data<float>(grad), *m = Data<float>(exp_avg),
          *v = Data<float>(exp_avg_sq);
    ParallelRanges(param.numel(),
                   [&](int64_t b, int64_t e) { UpdateRangeFp32(c, p, g, m, v, b, e); });
  } else {
    uint16_t *p = Data<uint16_t>(param), *g = Data<uint16_t>(grad), *m = Data<uint16_t>(exp_avg),
             *v = Data<uint16_t>(exp_avg_sq);
    ParallelRanges(param.numel(),
                   [&](int64_t b, int64_t e) { UpdateRangeBf16(c, p, g, m, v, b, e); });
  }
}

void AdamWUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
                         const torch::Tensor& grad, const torch::Tensor& exp_avg,
                         const torch::Tensor& exp_avg_sq) {
  if (exp_avg.is_pinned() && HostAdamWSupported(param, grad, exp_avg, exp_avg_sq)) {
    HostAdamW(hyper, step, param, grad, exp_avg, exp_avg_sq);
  } else {
    AdamWUpdate(hyper, step, param, grad, exp_avg, exp_avg_sq);
  }
}

bool HostAdamWMasterSupported(const torch::Tensor& master, const torch::Tensor& grad,
                              const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                              const torch::Tensor& param) {
  const torch::ScalarType dtype = param.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) return false;
  const int64_t n = master.numel();
  return ContiguousCpu(master, torch::kFloat, n) && ContiguousCpu(exp_avg, torch::kFloat, n) &&
         ContiguousCpu(exp_avg_sq, torch::kFloat, n) && ContiguousCpu(grad, dtype, n) &&
         ContiguousCpu(param, dtype, n);
}

void HostAdamWMaster(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                     const torch::Tensor& grad, const torch::Tensor& exp_avg,
                     const torch::Tensor& exp_avg_sq, const torch::Tensor& param) {
  if (!HostAdamWMasterSupported(master, grad, exp_avg, exp_avg_sq, param)) {
    throw std::invalid_argument(
        "HostAdamWMaster needs contiguous CPU tensors: fp32 master and moments, gradient and "
        "parameter of one dtype, float or bf16");
  }
  const AdamWFloatScalars c = FloatScalarsAt(hyper, step);
  float *w = Data<float>(master), *m = Data<float>(exp_avg), *v = Data<float>(exp_avg_sq);
  if (param.scalar_type() == torch::kFloat) {
    float *g = Data<float>(grad), *p = Data<float>(param);
    ParallelRanges(master.numel(),
                   [&](int64_t b, int64_t e) { UpdateMasterRangeFp32(c, w, g, m, v, p, b, e); });
  } else {
    uint16_t *g = Data<uint16_t>(grad), *p = Data<uint16_t>(param);
    ParallelRanges(master.numel(),
                   [&](int64_t b, int64_t e) { UpdateMasterRangeBf16(c, w, g, m, v, p, b, e); });
  }
}

void AdamWMasterUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                               const torch::Tensor& grad, const torch::Tensor& exp_avg,
                               const torch::Tensor& exp_avg_sq, const torch::Tensor& param) {
  if (exp_avg.is_pinned() && HostAdamWMasterSupported(master, grad, exp_avg, exp_avg_sq, param)) {
    HostAdamWMaster(hyper, step, master, grad, exp_avg, exp_avg_sq, param);
    return;
  }
  AdamWUpdate(hyper, step, master, grad.to(torch::kFloat), exp_avg, exp_avg_sq);
  param.copy_(master);
}

}  // namespace vramlab::worker::optim_internal
