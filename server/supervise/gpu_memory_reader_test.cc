// What the NVML reader says where it cannot read the driver. The reading itself needs an NVIDIA
// driver: tests/command/daemon_command_driver_view_test.cc reads one through a real daemon.
#include "server/supervise/gpu_memory_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;

TEST(GpuMemoryReaderTest, AMissingLibraryIsNamed) {
  auto reader = OpenNvmlReader("libvramlab-no-such-nvml.so.1");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reader.status().message(), HasSubstr("cannot load libvramlab-no-such-nvml.so.1"));
}

TEST(GpuMemoryReaderTest, ALibraryThatIsNotNvmlIsNamedWithTheFunctionItLacks) {
  auto reader = OpenNvmlReader("libm.so.6");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reader.status().message(), HasSubstr("libm.so.6 has no nvmlInit_v2"));
}

}  // namespace
}  // namespace vramlab::server
