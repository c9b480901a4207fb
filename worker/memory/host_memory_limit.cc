#include "worker/memory/host_memory_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace vramlab::worker {

int64_t HostMemoryLimitFromEnvironment() {
  const char* text = std::getenv("VRAMLAB_HOST_MEMORY_LIMIT_BYTES");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value <= 0) return 0;
  return value;
}

bool LimitDataSegment(int64_t bytes, std::string* error) {
  struct rlimit current;
  if (getrlimit(RLIMIT_DATA, &current) != 0) {
    *error = std::string("getrlimit(RLIMIT_DATA): ") + std::strerror(errno);
    return false;
  }
  rlim_t limit = static_cast<rlim_t>(bytes);
  if (current.rlim_cur != RLIM_INFINITY && current.rlim_cur < limit) return true;
  struct rlimit wanted = current;
  wanted.rlim_cur = limit;
  if (setrlimit(RLIMIT_DATA, &wanted) != 0) {
    *error = std::string("setrlimit(RLIMIT_DATA): ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace vramlab::worker
