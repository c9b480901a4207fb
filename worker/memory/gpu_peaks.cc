#include <string>

#include "worker/memory/device_backend.h"

namespace vramlab::worker {

double KnownBf16PeakFlops(const std::string& device_name) {
  // Dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets, SXM parts.
  // Ordered so that "H100 PCIe" is tested before the generic "H100".
  static const struct {
    const char* name_part;
    double flops;
  } kPeaks[] = {
      {"H200", 989e12},  {"H100 PCIe", 756e12}, {"H100", 989e12}, {"H800", 989e12},
      {"GH200", 989e12}, {"B200", 2250e12},     {"A100", 312e12}, {"A800", 312e12},
      {"L40S", 362e12},  {"RTX 4090", 165e12},
  };
  for (const auto& peak : kPeaks) {
    if (device_name.find(peak.name_part) != std::string::npos) return peak.flops;
  }
  return 0;
}

}  // namespace vramlab::worker
