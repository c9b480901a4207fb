#include "server/config/gpu_discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;

TEST(GpuDiscoveryTest, ParsesNvidiaSmiCsv) {
  auto gpus = ParseNvidiaSmi(
      "0, GPU-5a0c3d58-1f2e-7a9b-0c1d-2e3f4a5b6c7d, NVIDIA H200, 143771\n"
      "1, GPU-9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9, NVIDIA H200, 143771\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[1].index, 1);
  EXPECT_EQ((*gpus)[1].name, "NVIDIA H200");
  EXPECT_EQ((*gpus)[1].uuid, "GPU-9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9");
  EXPECT_EQ((*gpus)[1].total_memory_bytes, int64_t{143771} * 1024 * 1024);
  EXPECT_EQ((*gpus)[1].cuda_visible_devices, "1");
  EXPECT_FALSE(ParseNvidiaSmi("").ok());
  EXPECT_THAT(ParseNvidiaSmi("No devices were found\n").status().message(),
              HasSubstr("unexpected nvidia-smi line"));
}

TEST(GpuDiscoveryTest, SelectsFlagGpus) {
  auto gpus = *ParseNvidiaSmi("0, GPU-a, A, 100\n1, GPU-b, B, 100\n2, GPU-c, C, 100\n");
  auto selected = SelectGpus(gpus, "2,0");
  ASSERT_TRUE(selected.ok());
  ASSERT_EQ(selected->size(), 2u);
  EXPECT_EQ((*selected)[0].name, "C");
  EXPECT_EQ(SelectGpus(gpus, "")->size(), 3u);
  EXPECT_THAT(SelectGpus(gpus, "5").status().message(), HasSubstr("no GPU 5"));
  EXPECT_THAT(SelectGpus(gpus, "0,0").status().message(), HasSubstr("twice"));
  EXPECT_FALSE(SelectGpus(gpus, "x").ok());
}

TEST(GpuDiscoveryTest, CpuSlotsHideGpus) {
  auto slots = CpuSlots(2);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[1].index, 1);
  EXPECT_EQ(slots[1].cuda_visible_devices, "");
  EXPECT_GT(slots[0].total_memory_bytes, 0);
}

}  // namespace
}  // namespace vramlab::server
