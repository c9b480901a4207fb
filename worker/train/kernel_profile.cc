#include "worker/train/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <torch/version.h>
#include <nlohmann/json.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace vramlab::worker {

#if TORCH_VERSION_MAJOR >= 2

namespace {
namespace kineto_impl = torch::profiler::impl;

kineto_impl::ProfilerConfig KinetoConfig() {
  return kineto_impl::ProfilerConfig(kineto_impl::ProfilerState::KINETO);
}

std::set<kineto_impl::ActivityType> Activities(bool cuda) {
  return {cuda ? kineto_impl::ActivityType::CUDA : kineto_impl::ActivityType::CPU};
}

struct KernelTotal {
  int64_t calls = 0;
  uint64_t total_ns = 0;
};
}  // namespace

KernelProfile::~KernelProfile() {
  if (!running_) return;
  try {
    torch::autograd::profiler::disableProfiler();
  } catch (const std::exception&) {
  }
}

bool KernelProfile::Start(bool cuda, std::string* why_not) {
  try {
    cuda_ = cuda;
    torch::autograd::profiler::prepareProfiler(KinetoConfig(), Activities(cuda));
    torch::autograd::profiler::enableProfiler(KinetoConfig(), Activities(cuda));
    running_ = true;
    return true;
  } catch (const std::exception& e) {
    *why_not = e.what();
    return false;
  }
}

bool KernelProfile::Finish(const std::string& path, int32_t step, double step_seconds,
                           std::string* why_not) {
  if (!running_) {
    *why_not = "the profiler was not started";
    return false;
  }
  running_ = false;
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result;
  try {
    result = torch::autograd::profiler::disableProfiler();
  } catch (const std::exception& e) {
    *why_not = e.what();
    return false;
  }
  const c10::DeviceType wanted = cuda_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  std::map<std::string, KernelTotal> totals;
  for (const auto& event : result->events()) {
    if (event.deviceType() != wanted) continue;
    KernelTotal& total = totals[event.name()];
    ++total.calls;
    total.total_ns += event.durationNs();
  }
  if (totals.empty()) {
    *why_not = std::string("the profiler recorded no ") + (cuda_ ? "CUDA kernels" : "operators") +
               " (LibTorch built without Kineto?)";
    return false;
  }
  std::vector<std::pair<std::string, KernelTotal>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& [name, total] : sorted) {
    kernels.push_back({{"name", name}, {"calls", total.calls}, {"totalNs", total.total_ns}});
  }
  const nlohmann::json out = {{"step", step},
                              {"device", cuda_ ? "cuda" : "cpu"},
                              {"stepSeconds", step_seconds},
                              {"kernels", kernels}};
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::trunc);
    file << out.dump(1) << "\n";
    if (!file.good()) {
      *why_not = "cannot write " + partial;
      return false;
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    *why_not = "cannot rename " + partial + " to " + path;
    return false;
  }
  return true;
}

#else  // LibTorch 1.x: its profiler API differs; the kernel profile is a LibTorch 2 feature.

KernelProfile::~KernelProfile() = default;

bool KernelProfile::Start(bool, std::string* why_not) {
  *why_not = std::string("the kernel profile needs LibTorch 2.x (this is ") + TORCH_VERSION + ")";
  return false;
}

bool KernelProfile::Finish(const std::string&, int32_t, double, std::string* why_not) {
  *why_not = "the profiler was not started";
  return false;
}

#endif

}  // namespace vramlab::worker
