#include "worker/memory/oom.h"

#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

TEST(OomTest, UserVisibleMessagesLoseTheBacktrace) {
  const std::string c10_style =
      "DefaultCPUAllocator: can't allocate memory: you tried to allocate 4096 bytes.\n"
      "Exception raised from allocate at alloc_cpu.cpp:75 (most recent call first):\n"
      "frame #0: c10::Error::Error(...)\nframe #1: ...";
  EXPECT_EQ(FirstLinesOfError(c10_style),
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 4096 bytes.");
  EXPECT_EQ(FirstLinesOfError("shape mismatch\nframe #0: at::native::foo\nframe #1: bar"),
            "shape mismatch");
  EXPECT_EQ(FirstLinesOfError("plain message"), "plain message");
}

TEST(OomTest, RecognisesEveryAllocatorsRefusal) {
  EXPECT_TRUE(IsOutOfMemory(std::bad_alloc()));
  EXPECT_TRUE(IsOutOfMemory(std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB")));
  EXPECT_TRUE(
      IsOutOfMemory(std::runtime_error("DefaultCPUAllocator: can't allocate memory: you "
                                       "tried to allocate 55050304 bytes")));
  EXPECT_FALSE(IsOutOfMemory(std::runtime_error("shape mismatch")));
}

TEST(OomTest, RequestedBytesFromEachAllocatorsWording) {
  EXPECT_EQ(RequestedBytesFromMessage("CUDA out of memory. Tried to allocate 2.00 GiB"),
            int64_t{2} << 30);
  EXPECT_EQ(RequestedBytesFromMessage("Tried to allocate 4096 bytes (0.00 MiB)"), 4096);
  EXPECT_EQ(
      RequestedBytesFromMessage("can't allocate memory: you tried to allocate 55050304 bytes"),
      55050304);
  EXPECT_EQ(RequestedBytesFromMessage("no size here"), 0);
}

TEST(OomTest, ParsesRoundedCudaMessages) {
  EXPECT_EQ(RequestedBytesFromMessage("CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has"),
            60LL << 30);
  EXPECT_EQ(RequestedBytesFromMessage("Tried to allocate 2.50 MiB (GPU 0;"), 2621440);
  EXPECT_EQ(RequestedBytesFromMessage("no size here"), 0);
  EXPECT_EQ(FirstLinesOfError("CUDA out of memory.\nException raised from malloc at x.cpp:1"),
            "CUDA out of memory.");
}

}  // namespace
}  // namespace vramlab::worker
