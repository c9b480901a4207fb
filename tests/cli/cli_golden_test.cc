// `vramlab compare` text against a golden file, for the lab report's two basic experiments on the
// tiny preset (CPU, fp32). Only deterministic rows are compared: the legend (ids are assigned in
// order by a fresh daemon), the header and the bytes of weights, gradients and optimizer state,
// and at the peak moments the weights and the allocator cache (none on the CPU), which the
// counting CPU allocator measures exactly from the spec alone. Times, activation peaks
// and allocator-cache rows depend on the machine and are left out.
//
// To regenerate after an intended format change:
//   VRAMLAB_UPDATE_GOLDEN=1 ctest --test-dir build -R cli_golden_test   (then review the diff)
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

constexpr const char* kDeterministicRows[] = {"id ",
                                              "exp-",
                                              "category ",
                                              "weights ",
                                              "gradients ",
                                              "optimizer state ",
                                              "at peak: weights ",
                                              "at peak: allocator cache "};

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
  const std::vector<std::string> common = {"submit",    addr, "--preset", "tiny", "--dtype", "fp32",
                                           "--seq-len", "32", "--steps",  "1",    "--wait"};
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
      << "full output:\n"
      << compare.out << "\nregenerate with VRAMLAB_UPDATE_GOLDEN=1 if the change is intended";
}

// The OOM views of a real CPU run that runs out of memory (the sad path under a 3.5 MiB limit)
// next to one that fits. Where the run fails depends on LibTorch's allocation pattern, so the
// views are checked for what they must say rather than against fixed bytes: `show`, `watch` and
// `compare` state the allocator at the failure, the request, what was free and the peaks, next to
// the prediction; and the state is the one at the failure — allocated + free is the limit exactly
// (the counting CPU allocator), not a reading after the failed step's tensors were freed.
TEST(CliGoldenTest, OomViewsOfTheSadPathOnTheTinyPreset) {
  constexpr int64_t kLimit = 3670016;
  auto daemon = vramlab::testing::DaemonHarness::Start({.enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string addr = "--addr=" + (*daemon)->address();
  const std::vector<std::string> common = {"submit",
                                           addr,
                                           "--preset",
                                           "tiny",
                                           "--dtype",
                                           "fp32",
                                           "--seq-len",
                                           "32",
                                           "--steps",
                                           "2",
                                           "--wait",
                                           "--memory-limit",
                                           std::to_string(kLimit)};
  std::vector<std::string> sad = common, happy = common;
  sad.insert(sad.end(), {"--name", "sad path", "--micro-batch", "4", "--accum", "1"});
  happy.insert(happy.end(), {"--name", "happy path", "--micro-batch", "1", "--accum", "4"});
  CliResult a = RunCli(sad);
  ASSERT_FALSE(a.OutLines().empty()) << Describe(a);
  CliResult b = RunCli(happy);
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  const std::string sad_id = a.OutLines().at(0);

  CliResult json = RunCli({"show", addr, "--json", sad_id});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  const nlohmann::json experiment = nlohmann::json::parse(json.out);
  ASSERT_EQ(experiment["state"], "OOM") << json.out;
  const nlohmann::json& oom = experiment["oom"];
  const int64_t allocated = std::stoll(oom["memory"]["allocatedBytes"].get<std::string>());
  const int64_t free = std::stoll(oom["freeBytes"].get<std::string>());
  const int64_t requested = std::stoll(oom["requestedBytes"].get<std::string>());
  EXPECT_EQ(allocated + free, kLimit);
  EXPECT_GT(requested, free);
  EXPECT_GE(std::stoll(oom["memory"]["peakAllocatedBytes"].get<std::string>()), allocated);

  CliResult show = RunCli({"show", addr, sad_id});
  ASSERT_EQ(show.exit_code, 0) << Describe(show);
  EXPECT_THAT(show.out, ::testing::HasSubstr("out of memory:\n  phase "));
  EXPECT_THAT(
      show.out,
      ::testing::MatchesRegex(
          "(.|\n)*\n  requested [0-9.]+ [KM]iB, free [0-9.]+ [KM]iB, allocated [0-9.]+ MiB, "
          "reserved [0-9.]+ MiB\n  peak allocated [0-9.]+ MiB, peak reserved [0-9.]+ MiB; "
          "predicted "
          "[0-9.]+ MiB and [0-9.]+ MiB\n(.|\n)*"));
  CliResult watch = RunCli({"watch", addr, sad_id});
  EXPECT_THAT(
      watch.out,
      ::testing::MatchesRegex(
          "(.|\n)*OOM in [a-z_]+ \\(step [0-9]+, micro-step [0-9]+\\): tried to allocate [0-9.]+ "
          "[KM]iB, [0-9.]+ [KM]iB free; allocated [0-9.]+ MiB, reserved [0-9.]+ MiB at the "
          "failure, "
          "peak [0-9.]+ MiB allocated\n(.|\n)*"));
  CliResult compare = RunCli({"compare", addr, b.OutLines().at(0), sad_id});
  ASSERT_EQ(compare.exit_code, 0) << Describe(compare);
  EXPECT_THAT(compare.out,
              ::testing::MatchesRegex(
                  "(.|\n)*\npredicted peak allocated +[0-9.]+ [KM]iB +[0-9.]+ [KM]iB\n(.|\n)*"));
  // The run that fitted has no OOM figures; the one that failed has all four.
  for (const char* row : {"OOM: allocated", "OOM: reserved", "OOM: request", "OOM: free"}) {
    EXPECT_THAT(compare.out, ::testing::MatchesRegex(
                                 absl::StrCat("(.|\n)*\n", row, " +- +[0-9.]+ [KM]iB\n(.|\n)*")))
        << row << "\n"
        << compare.out;
  }
  // The OOM run's peaks stand in the peak rows, measured up to the failure.
  EXPECT_THAT(
      compare.out,
      ::testing::MatchesRegex(
          "(.|\n)*\npeak allocated +[0-9.]+ [KM]iB +[0-9.]+ [KM]iB +[-+][0-9.]+ [KM]iB\n(.|\n)*"));
}

}  // namespace
}  // namespace vramlab::cli_test
