#include "server/supervise/gpu_memory_reader.h"

#include <dlfcn.h>

#include <map>

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

// The parts of NVML's C interface (nvml.h) the reader uses, declared here so that no NVIDIA header
// is needed to build. NVML keeps these layouts and values stable across drivers: a changed layout
// gets a new versioned function name.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlErrorNotFound = 6;
constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlProcessInfo_t as the _v2 and _v3 process queries fill it.
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ErrorStringFn = const char* (*)(NvmlReturn);
using HandleByUuidFn = NvmlReturn (*)(const char*, NvmlDevice*);
using MemoryInfoFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

class NvmlReader final : public GpuMemoryReader {
 public:
  NvmlReader(void* library, ShutdownFn shutdown, ErrorStringFn error_string,
             HandleByUuidFn handle_by_uuid, MemoryInfoFn memory_info, ProcessesFn processes)
      : library_(library),
        shutdown_(shutdown),
        error_string_(error_string),
        handle_by_uuid_(handle_by_uuid),
        memory_info_(memory_info),
        processes_(processes) {}

  ~NvmlReader() override {
    shutdown_();
    dlclose(library_);
  }

  absl::StatusOr<GpuMemoryReading> Read(const std::string& gpu_uuid) override {
    auto it = devices_.find(gpu_uuid);
    if (it == devices_.end()) {
      NvmlDevice device = nullptr;
      const NvmlReturn found = handle_by_uuid_(gpu_uuid.c_str(), &device);
      if (found == kNvmlErrorNotFound) {
        return absl::NotFoundError(absl::StrCat("NVML knows no GPU ", gpu_uuid));
      }
      if (found != kNvmlSuccess) return Failed("nvmlDeviceGetHandleByUUID", found);
      it = devices_.emplace(gpu_uuid, device).first;
    }
    NvmlMemory memory{};
    const NvmlReturn read = memory_info_(it->second, &memory);
    if (read != kNvmlSuccess) return Failed("nvmlDeviceGetMemoryInfo", read);
    GpuMemoryReading reading;
    reading.total_bytes = static_cast<int64_t>(memory.total);
    reading.used_bytes = static_cast<int64_t>(memory.total - memory.free);
    // The list can grow between the size query and the read: retry with room to spare.
    std::vector<NvmlProcessInfo> infos(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned int count = static_cast<unsigned int>(infos.size());
      const NvmlReturn listed = processes_(it->second, &count, infos.data());
      if (listed == kNvmlErrorInsufficientSize) {
        infos.resize(2 * count + 16);
        continue;
      }
      if (listed != kNvmlSuccess) return Failed("nvmlDeviceGetComputeRunningProcesses", listed);
      for (unsigned int i = 0; i < count; ++i) {
        GpuProcessMemory process;
        process.pid = static_cast<pid_t>(infos[i].pid);
        process.used_bytes = infos[i].used_gpu_memory == kNvmlValueNotAvailable
                                 ? -1
                                 : static_cast<int64_t>(infos[i].used_gpu_memory);
        reading.processes.push_back(process);
      }
      return reading;
    }
    return absl::UnavailableError("NVML's process list kept growing while it was read");
  }

 private:
  absl::Status Failed(const char* function, NvmlReturn code) const {
    return absl::UnavailableError(
        absl::StrCat(function, " failed: ", error_string_(code), " (NVML error ", code, ")"));
  }

  void* const library_;
  const ShutdownFn shutdown_;
  const ErrorStringFn error_string_;
  const HandleByUuidFn handle_by_uuid_;
  const MemoryInfoFn memory_info_;
  const ProcessesFn processes_;
  std::map<std::string, NvmlDevice> devices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuMemoryReader>> OpenNvmlReader(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", library, ": ", why != nullptr ? why : "dlopen failed"));
  }
  auto symbol = [handle](const char* name) { return dlsym(handle, name); };
  auto init = reinterpret_cast<InitFn>(symbol("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(symbol("nvmlShutdown"));
  auto error_string = reinterpret_cast<ErrorStringFn>(symbol("nvmlErrorString"));
  auto handle_by_uuid = reinterpret_cast<HandleByUuidFn>(symbol("nvmlDeviceGetHandleByUUID"));
  auto memory_info = reinterpret_cast<MemoryInfoFn>(symbol("nvmlDeviceGetMemoryInfo"));
  // _v3 (drivers from 510 on) and _v2 fill the same structure.
  auto processes = reinterpret_cast<ProcessesFn>(symbol("nvmlDeviceGetComputeRunningProcesses_v3"));
  if (processes == nullptr) {
    processes = reinterpret_cast<ProcessesFn>(symbol("nvmlDeviceGetComputeRunningProcesses_v2"));
  }
  const char* missing = init == nullptr             ? "nvmlInit_v2"
                        : shutdown == nullptr       ? "nvmlShutdown"
                        : error_string == nullptr   ? "nvmlErrorString"
                        : handle_by_uuid == nullptr ? "nvmlDeviceGetHandleByUUID"
                        : memory_info == nullptr    ? "nvmlDeviceGetMemoryInfo"
                        : processes == nullptr ? "nvmlDeviceGetComputeRunningProcesses_v3 (or _v2)"
                                               : nullptr;
  if (missing != nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(library, " has no ", missing));
  }
  const NvmlReturn started = init();
  if (started != kNvmlSuccess) {
    const std::string why = error_string(started);
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(library, ": nvmlInit failed: ", why, " (NVML error ", started, ")"));
  }
  return std::unique_ptr<GpuMemoryReader>(
      new NvmlReader(handle, shutdown, error_string, handle_by_uuid, memory_info, processes));
}

}  // namespace vramlab::server
