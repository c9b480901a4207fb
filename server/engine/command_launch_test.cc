#include "server/engine/command_launch.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

std::set<std::string> Names(const std::vector<std::string>& env) {
  std::set<std::string> names;
  for (const std::string& entry : env) names.insert(entry.substr(0, entry.find('=')));
  return names;
}

// What a rank is given is exactly what a spec's env may not set for a world of two or more
// (kCommandRankEnvNames), plus the probe's device.
TEST(CommandRankEnvironmentTest, SetsExactlyTheNamesTheSpecMayNot) {
  const std::vector<std::string> env = CommandRankEnvironment(
      {.run_id = "exp-000007", .rank = 1, .world_size = 3, .master_port = 29411});
  std::set<std::string> expected(std::begin(kCommandRankEnvNames), std::end(kCommandRankEnvNames));
  expected.insert("VRAMLAB_PROBE_CUDA_DEVICE");
  EXPECT_EQ(Names(env), expected);
  EXPECT_THAT(env, ::testing::IsSupersetOf({"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=3",
                                            "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1",
                                            "MASTER_PORT=29411", "TORCHELASTIC_RUN_ID=exp-000007",
                                            "VRAMLAB_PROBE_CUDA_DEVICE=1"}));
}

// A world of one is the program alone: no rendezvous, device 0.
TEST(CommandRankEnvironmentTest, OneProcessGetsOnlyTheProbeDevice) {
  EXPECT_EQ(CommandRankEnvironment({.run_id = "exp-000007"}),
            std::vector<std::string>{"VRAMLAB_PROBE_CUDA_DEVICE=0"});
}

}  // namespace
}  // namespace vramlab::server
