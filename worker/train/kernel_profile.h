// One training step's kernels, recorded with the profiler LibTorch ships (Kineto), for the
// question "where does the step's time go". Written as one JSON object:
//   {"step": S, "device": "cuda", "stepSeconds": T,
//    "kernels": [{"name": N, "calls": C, "totalNs": D}, ...]}     (largest totalNs first)
// On CUDA the entries are device kernels and copies; on the CPU, operators (which nest, so
// their times overlap). bench/gpu/kernel_profile.py groups them into a table.
#ifndef VRAMLAB_WORKER_TRAIN_KERNEL_PROFILE_H_
#define VRAMLAB_WORKER_TRAIN_KERNEL_PROFILE_H_

#include <cstdint>
#include <string>

namespace vramlab::worker {

// Not thread-safe: Start and Finish are called by the training thread, in that order.
class KernelProfile {
 public:
  KernelProfile() = default;
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;
  // A step that throws (out of memory) leaves the profiler recording: stopped here, unwritten.
  ~KernelProfile();

  // Starts recording. False, with why_not, when this LibTorch has no such profiler.
  bool Start(bool cuda, std::string* why_not);
  // Stops recording (the caller has synchronized the device) and writes `path`. False, with
  // why_not, when nothing was recorded or the file cannot be written.
  bool Finish(const std::string& path, int32_t step, double step_seconds, std::string* why_not);

 private:
  bool cuda_ = false;
  bool running_ = false;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_KERNEL_PROFILE_H_
