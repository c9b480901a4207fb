// `vramlab compare` text against a golden file, for the lab report's two basic experiments on the
// tiny preset (CPU, fp32). Only deterministic rows are compared: the legend (ids are assigned in
// order by a fresh daemon), the header and the bytes of weights, gradients and optimizer state,
// which the counting CPU allocator measures exactly from the spec alone. Times, activation peaks
// and allocator-cache rows depend on the machine and are left out.
//
// To regenerate after an intended format change:
//   VRAMLAB_UPDATE_GOLDEN=1 ctest --test-dir build -R cli_golden_test   (then review the diff)
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

constexpr const char* kDeterministicRows[] = {"id ", "exp-", "category ", "weights ", "gradients ",
                                              "optimizer state "};

std::string DeterministicLines(const std::string& table) {
  std::vector<std::string> kept;
  for (const auto& line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    for (const char* prefix : kDeterministicRows) {
      if (absl::StartsWith(line, prefix)) {
        kept.emplace_back(line);
        break;
      }
    }
  }
  return absl::StrJoin(kept, "\n") + "\n";
}

TEST(CliGoldenTest, CompareOfTheBasicExperimentsOnTheTinyPreset) {
  auto daemon = vramlab::testing::DaemonHarness::Start({.enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string addr = "--addr=" + (*daemon)->address();
  const std::vector<std::string> common = {"submit", addr, "--preset", "tiny", "--dtype", "fp32",
                                           "--seq-len", "32", "--steps", "1", "--wait"};
  std::vector<std::string> sad = common, happy = common;
  sad.insert(sad.end(), {"--name", "sad path", "--micro-batch", "4", "--accum", "1"});
  happy.insert(happy.end(), {"--name", "happy path", "--micro-batch", "1", "--accum", "4"});
  CliResult a = RunCli(sad);
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  CliResult b = RunCli(happy);
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  CliResult compare = RunCli({"compare", addr, a.OutLines().at(0), b.OutLines().at(0)});
  ASSERT_EQ(compare.exit_code, 0) << Describe(compare);
  const std::string actual = DeterministicLines(compare.out);

  const std::string golden_path =
      std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/testdata/compare_golden.txt";
  if (std::getenv("VRAMLAB_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden_path) << actual;  // then compared like any run, so it passes
  }
  EXPECT_EQ(actual, ReadWholeFile(golden_path))
      << "full output:\n" << compare.out
      << "\nregenerate with VRAMLAB_UPDATE_GOLDEN=1 if the change is intended";
}

}  // namespace
}  // namespace vramlab::cli_test
