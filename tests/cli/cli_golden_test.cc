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
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
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

// The OOM views of a real CPU run that runs out of memory (the sad path under a 3.5 MiB limit) next
// to one that fits: `show`, `watch` and `compare` state the allocator at the failure, the request,
// what was free and the peaks, next to the prediction. The counting CPU allocator makes these
// exact, so they are compared whole; times are not shown in these lines.
TEST(CliGoldenTest, OomViewsOfTheSadPathOnTheTinyPreset) {
  auto daemon = vramlab::testing::DaemonHarness::Start({.enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string addr = "--addr=" + (*daemon)->address();
  const std::vector<std::string> common = {"submit", addr, "--preset", "tiny", "--dtype", "fp32",
                                           "--seq-len", "32", "--steps", "2", "--wait",
                                           "--memory-limit", "3670016"};
  std::vector<std::string> sad = common, happy = common;
  sad.insert(sad.end(), {"--name", "sad path", "--micro-batch", "4", "--accum", "1"});
  happy.insert(happy.end(), {"--name", "happy path", "--micro-batch", "1", "--accum", "4"});
  CliResult a = RunCli(sad);
  ASSERT_FALSE(a.OutLines().empty()) << Describe(a);
  CliResult b = RunCli(happy);
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  const std::string sad_id = a.OutLines().at(0);
  CliResult show = RunCli({"show", addr, sad_id});
  ASSERT_EQ(show.exit_code, 0) << Describe(show);
  CliResult watch = RunCli({"watch", addr, sad_id});
  CliResult compare = RunCli({"compare", addr, b.OutLines().at(0), sad_id});
  ASSERT_EQ(compare.exit_code, 0) << Describe(compare);

  std::string actual;
  const auto keep = [&actual](const std::string& text, std::vector<std::string> prefixes) {
    for (const auto& line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      for (const auto& prefix : prefixes) {
        if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), prefix)) {
          actual += std::string(line) + "\n";
          break;
        }
      }
    }
  };
  keep(show.out, {"out of memory", "phase ", "requested ", "peak allocated "});
  for (const auto& line : absl::StrSplit(watch.out, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, "OOM in") && absl::StrContains(line, "tried to allocate")) actual += std::string(line.substr(line.find("OOM in"))) + "\n";
  }
  keep(compare.out, {"exp-", "peak allocated", "peak reserved", "predicted peak", "OOM: "});

  const std::string golden_path =
      std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/testdata/oom_views_golden.txt";
  if (std::getenv("VRAMLAB_UPDATE_GOLDEN") != nullptr) std::ofstream(golden_path) << actual;
  EXPECT_EQ(actual, ReadWholeFile(golden_path))
      << "show:\n" << show.out << "\nwatch:\n" << watch.out << "\ncompare:\n" << compare.out
      << "\nregenerate with VRAMLAB_UPDATE_GOLDEN=1 if the change is intended";
}

}  // namespace
}  // namespace vramlab::cli_test
