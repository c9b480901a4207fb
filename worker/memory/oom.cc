#include "worker/memory/oom.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <c10/util/Exception.h>

namespace vramlab::worker {

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const std::string what = e.what();
  // ATen's DefaultCPUAllocator when malloc fails (e.g. under the worker's RLIMIT_DATA cap).
  return what.find("out of memory") != std::string::npos ||
         what.find("CUBLAS_STATUS_ALLOC_FAILED") != std::string::npos ||
         what.find("can't allocate memory") != std::string::npos;
}

int64_t RequestedBytesFromMessage(const std::string& message) {
  static const std::string kMarker =
      "ried to allocate ";  // "Tried" (CUDA, counting) or "tried" (ATen CPU)
  const size_t at = message.find(kMarker);
  if (at == std::string::npos) return 0;
  const char* begin = message.c_str() + at + kMarker.size();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(value)) return 0;
  while (*end == ' ') ++end;
  const std::string unit(end, end + std::min<size_t>(5, std::strlen(end)));
  double scale = 1;
  if (unit.rfind("KiB", 0) == 0)
    scale = 1024.0;
  else if (unit.rfind("MiB", 0) == 0)
    scale = 1024.0 * 1024;
  else if (unit.rfind("GiB", 0) == 0)
    scale = 1024.0 * 1024 * 1024;
  else if (unit.rfind("TiB", 0) == 0)
    scale = 1024.0 * 1024 * 1024 * 1024;
  return static_cast<int64_t>(std::llround(value * scale));
}

std::string FirstLinesOfError(const std::string& what) {
  for (const char* marker : {"\nException raised from ", "Exception raised from ", "\nframe #"}) {
    const size_t at = what.find(marker);
    if (at != std::string::npos) return what.substr(0, at);
  }
  return what;
}

}  // namespace vramlab::worker
