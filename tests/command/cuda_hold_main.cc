// vramlab-test-cuda-hold: a program that is not Python and holds GPU memory, for the driver's-view
// test of command experiments (daemon_command_driver_view_test). Through the CUDA driver API
// (libcuda.so.1, loaded at run time, so it builds without a CUDA toolkit) it allocates BYTES on
// the first visible device, writes it, prints "holding BYTES" and its pid, sleeps HOLD_MS, frees
// it and exits 0. It never writes to fd 3: the daemon hears nothing from it.
//
//   vramlab-test-cuda-hold BYTES HOLD_MS
//
// Exit 2: bad arguments; 3: CUDA failed (the message names the call).
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

using CuResult = int;
using CuInit = CuResult (*)(unsigned int);
using CuDeviceGet = CuResult (*)(int*, int);
using CuPrimaryCtxRetain = CuResult (*)(void**, int);
using CuCtxSetCurrent = CuResult (*)(void*);
using CuMemAlloc = CuResult (*)(unsigned long long*, size_t);
using CuMemsetD8 = CuResult (*)(unsigned long long, unsigned char, size_t);
using CuMemFree = CuResult (*)(unsigned long long);
using CuCtxSynchronize = CuResult (*)();

int Fail(const char* what, CuResult code) {
  std::fprintf(stderr, "vramlab-test-cuda-hold: %s failed (CUresult %d)\n", what, code);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  char* end = nullptr;
  const long long bytes = argc == 3 ? std::strtoll(argv[1], &end, 10) : 0;
  if (argc != 3 || end == nullptr || *end != '\0' || bytes <= 0) {
    std::fprintf(stderr, "usage: vramlab-test-cuda-hold BYTES HOLD_MS\n");
    return 2;
  }
  const long hold_ms = std::strtol(argv[2], nullptr, 10);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == nullptr) {
    std::fprintf(stderr, "vramlab-test-cuda-hold: %s\n", dlerror());
    return 3;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(cuda, "cuInit"));
  auto device_get = reinterpret_cast<CuDeviceGet>(dlsym(cuda, "cuDeviceGet"));
  auto retain = reinterpret_cast<CuPrimaryCtxRetain>(dlsym(cuda, "cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<CuCtxSetCurrent>(dlsym(cuda, "cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<CuMemAlloc>(dlsym(cuda, "cuMemAlloc_v2"));
  auto memset8 = reinterpret_cast<CuMemsetD8>(dlsym(cuda, "cuMemsetD8_v2"));
  auto release = reinterpret_cast<CuMemFree>(dlsym(cuda, "cuMemFree_v2"));
  auto synchronize = reinterpret_cast<CuCtxSynchronize>(dlsym(cuda, "cuCtxSynchronize"));
  if (!init || !device_get || !retain || !set_current || !alloc || !memset8 || !release ||
      !synchronize) {
    std::fprintf(stderr, "vramlab-test-cuda-hold: libcuda.so.1 lacks a driver API function\n");
    return 3;
  }
  int device = 0;
  void* context = nullptr;
  unsigned long long pointer = 0;
  CuResult r = init(0);
  if (r != 0) return Fail("cuInit", r);
  if ((r = device_get(&device, 0)) != 0) return Fail("cuDeviceGet", r);
  if ((r = retain(&context, device)) != 0) return Fail("cuDevicePrimaryCtxRetain", r);
  if ((r = set_current(context)) != 0) return Fail("cuCtxSetCurrent", r);
  if ((r = alloc(&pointer, static_cast<size_t>(bytes))) != 0) return Fail("cuMemAlloc", r);
  if ((r = memset8(pointer, 1, static_cast<size_t>(bytes))) != 0) return Fail("cuMemsetD8", r);
  if ((r = synchronize()) != 0) return Fail("cuCtxSynchronize", r);
  std::printf("holding %lld\npid %d\n", bytes, static_cast<int>(getpid()));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  if ((r = release(pointer)) != 0) return Fail("cuMemFree", r);
  return 0;
}
