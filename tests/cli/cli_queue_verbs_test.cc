// The queue verbs as a person types them: `vramlab cancel A B C` reporting each id and naming the
// ones that failed, `cancel --mine --state queued` by filter, hold/release/update/delete, submit
// --after/--after-ok, the start estimate in ls, show and watch, `watch --quiet`, `snapshot` of a
// run without one, and `logs --follow` printing a log as the worker writes it. A real daemon on one
// CPU slot with a stand-in worker (tests/support/stand_in_worker.h).
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli/cli_runner.h"
#include "tests/support/stand_in_worker.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::testing::DaemonHarness;

class CliQueueVerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_ = vramlab::testing::WriteStandInWorker();
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1", "--worker-path=" + worker_, "--cancel-grace-period=1s",
                         "--shutdown-grace-period=0s"},
         .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(std::filesystem::path(worker_).parent_path());
  }
  CliResult Run(std::vector<std::string> args) {
    args.push_back("--addr=" + daemon_->address());
    return RunCli(args);
  }
  // Submits with `extra` flags; the new id.
  std::string SubmitTiny(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"submit",  "--preset", "tiny",   "--seq-len", "32",
                                     "--steps", "1",        "--name", name};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return std::string(absl::StripAsciiWhitespace(r.out));
  }
  std::string StateOf(const std::string& id) {
    CliResult r = Run({"show", id, "--json"});
    vramlab::v1::Experiment experiment;
    EXPECT_TRUE(ParseJson(r.out, experiment));
    return vramlab::v1::Experiment::State_Name(experiment.state());
  }
  std::string WaitRunning(const std::string& id) {
    for (int i = 0; i < 300; ++i) {
      const std::string state = StateOf(id);
      if (state != "QUEUED") return state;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return "timeout";
  }
  std::string WaitEnded(const std::string& id) {
    for (int i = 0; i < 300; ++i) {
      const std::string state = StateOf(id);
      if (state != "QUEUED" && state != "RUNNING") return state;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return "timeout";
  }

  std::string worker_;
  std::unique_ptr<DaemonHarness> daemon_;
};

TEST_F(CliQueueVerbsTest, CancelSeveralReportsEachAndNamesFailures) {
  const std::string running = SubmitTiny("hang");
  const std::string queued = SubmitTiny("queued");
  ASSERT_EQ(WaitRunning(running), "RUNNING");
  // The queued one first: cancel handles the IDs in order, and once the running one's stop lands
  // its slot frees and the queued one would start.
  CliResult r = Run({"cancel", queued, running, "exp-999999"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);  // NOT_FOUND: an RPC error
  EXPECT_THAT(r.out, HasSubstr(running + " RUNNING (cancellation requested)\n"));
  EXPECT_THAT(r.out, HasSubstr(queued + " CANCELLED\n"));
  EXPECT_THAT(r.err, HasSubstr("vramlab: exp-999999: NOT_FOUND: experiment exp-999999 not found"));
  EXPECT_THAT(r.err, HasSubstr("vramlab: cancel: 1 of 3 failed"));
  // --json: one Experiment per line for each that worked.
  const std::string more = SubmitTiny("hang-more");
  const std::string another = SubmitTiny("hang-another");
  CliResult json = Run({"cancel", more, another, "--json"});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  ASSERT_EQ(json.OutLines().size(), 2u) << json.out;
  vramlab::v1::Experiment first;
  ASSERT_TRUE(ParseJson(json.OutLines()[0], first));
  EXPECT_EQ(first.id(), more);
  // Running (its stop requested), or still queued behind the first hang's stop: cancelled.
  EXPECT_THAT(vramlab::v1::Experiment::State_Name(first.state()),
              ::testing::AnyOf("RUNNING", "CANCELLED"));
  vramlab::v1::Experiment second;
  ASSERT_TRUE(ParseJson(json.OutLines()[1], second));
  EXPECT_EQ(second.id(), another);
  CliResult none = Run({"cancel"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("vramlab cancel needs at least one experiment ID"));
}

TEST_F(CliQueueVerbsTest, CancelByFilterCancelsEveryMatchAndRefusesNoTarget) {
  const std::string running = SubmitTiny("hang");
  ASSERT_EQ(WaitRunning(running), "RUNNING");
  const std::string queued_a = SubmitTiny("queued-a");
  const std::string queued_b = SubmitTiny("queued-b");

  CliResult neither = Run({"cancel"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_THAT(neither.err, HasSubstr("needs at least one experiment ID, or a filter (--mine"));
  CliResult both = Run({"cancel", queued_a, "--mine"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("IDs or a filter (--mine, --owner, --state), not both"));
  CliResult finished = Run({"cancel", "--mine", "--state", "succeeded"});
  EXPECT_EQ(finished.exit_code, 2);
  EXPECT_THAT(finished.err, HasSubstr("--state: only queued and running"));
  CliResult typo = Run({"cancel", "--mine", "--state", "queud"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("--state: unknown state \"queud\" (did you mean \"queued\"?)"));
  CliResult unscoped = Run({"cancel", "--state", "queued"});
  EXPECT_EQ(unscoped.exit_code, 2);
  EXPECT_THAT(unscoped.err, HasSubstr("--state needs --mine or --owner USER"));
  CliResult stranger = Run({"cancel", "--owner", "nobody"});
  EXPECT_EQ(stranger.exit_code, 0) << Describe(stranger);
  EXPECT_THAT(stranger.err, HasSubstr("no experiment matches"));

  // Only the queued ones: the running one keeps running. Oldest first, each reported.
  CliResult queued = Run({"cancel", "--mine", "--state", "queued"});
  EXPECT_EQ(queued.exit_code, 0) << Describe(queued);
  EXPECT_EQ(queued.out, queued_a + " CANCELLED\n" + queued_b + " CANCELLED\n");
  EXPECT_EQ(StateOf(running), "RUNNING");

  // Repeated --state and a comma list mean the same; queued ones go before running ones.
  const std::string queued_c = SubmitTiny("queued-c");
  CliResult all =
      Run({"cancel", "--owner", "local", "--state", "running", "--state", "queued,running"});
  EXPECT_EQ(all.exit_code, 0) << Describe(all);
  EXPECT_EQ(all.out, queued_c + " CANCELLED\n" + running + " RUNNING (cancellation requested)\n");
  EXPECT_EQ(WaitEnded(running), "CANCELLED");
}

TEST_F(CliQueueVerbsTest, WatchShowsTheStartEstimateAndQuietOnlyTheOutcome) {
  const std::string blocker = SubmitTiny("hang", {"--time-limit", "10m"});
  ASSERT_EQ(WaitRunning(blocker), "RUNNING");
  const std::string waiting = SubmitTiny("waiting");
  // Not a terminal: one plain line per update, the first the queued state with the estimate.
  const std::string out = TempPath("watch-queued.out");
  CliResult started =
      RunShell(absl::StrCat(CliCommand({"watch", waiting, "--addr=" + daemon_->address()}, {}),
                            " > ", out, " 2>&1 & echo $!"));
  ASSERT_EQ(started.exit_code, 0);
  std::string seen;
  for (int i = 0; i < 100 && !absl::StrContains(seen, "QUEUED"); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    seen = ReadWholeFile(out);
  }
  EXPECT_THAT(seen, HasSubstr(waiting + " QUEUED (position 1 in queue, starts in "));
  ASSERT_EQ(Run({"cancel", blocker}).exit_code, 0);
  EXPECT_EQ(WaitEnded(waiting), "SUCCEEDED");

  // --quiet: the outcome line and nothing else (no anatomy table).
  CliResult quiet = Run({"watch", waiting, "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0) << Describe(quiet);
  ASSERT_EQ(quiet.OutLines().size(), 1u) << quiet.out;
  EXPECT_THAT(quiet.out, ::testing::StartsWith(waiting + " SUCCEEDED"));
  EXPECT_THAT(Run({"watch", blocker, "--quiet"}).exit_code, 4);
  // Without --quiet the same end carries the anatomy.
  EXPECT_THAT(Run({"watch", waiting}).out, HasSubstr("anatomy"));

  // No allocator snapshot: the error says what records one.
  CliResult snapshot = Run({"snapshot", waiting, "-o", TempPath("none.pickle")});
  EXPECT_EQ(snapshot.exit_code, 6);
  EXPECT_THAT(snapshot.err, HasSubstr("has no allocator snapshot: only a run on a CUDA daemon "
                                      "submitted with --record-history records one"));
}

TEST_F(CliQueueVerbsTest, HoldUpdateReleaseAfterEstimateAndDelete) {
  const std::string blocker = SubmitTiny("hang", {"--time-limit", "10m"});
  const std::string first = SubmitTiny("first");
  const std::string dependent = SubmitTiny("dependent", {"--after-ok", first});

  CliResult ls = Run({"ls"});
  EXPECT_THAT(ls.out, HasSubstr("STARTS"));
  EXPECT_THAT(ls.out, HasSubstr("(after " + first + ")"));
  CliResult show = Run({"show", first});
  EXPECT_THAT(show.out, HasSubstr("from the time limits of 1 running"));
  EXPECT_THAT(show.out, HasSubstr("starts:"));
  EXPECT_THAT(Run({"show", dependent}).out, HasSubstr(first + " (only if it succeeds)"));

  CliResult held = Run({"hold", first});
  EXPECT_EQ(held.exit_code, 0) << Describe(held);
  EXPECT_THAT(held.out, HasSubstr(first + " held (position 1; 'vramlab release " + first));
  EXPECT_THAT(Run({"ls"}).out, HasSubstr("held"));
  CliResult updated =
      Run({"update", first, "--priority", "high", "--time-limit", "20m", "--name", "renamed"});
  EXPECT_EQ(updated.exit_code, 0) << Describe(updated);
  EXPECT_THAT(updated.out, HasSubstr(": priority high, time limit 20m00s, name renamed"));
  CliResult bad = Run({"update", first, "--priority", "urgent"});
  EXPECT_EQ(bad.exit_code, 2);
  CliResult nothing = Run({"update", first});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("needs at least one of --priority, --time-limit, --name"));

  // Deleting what has not ended says what to do first.
  CliResult refused = Run({"delete", blocker});
  EXPECT_EQ(refused.exit_code, 6);
  EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION: experiment " + blocker +
                                     " is RUNNING: cancel it first"));

  ASSERT_EQ(Run({"cancel", blocker}).exit_code, 0);
  EXPECT_EQ(WaitEnded(blocker), "CANCELLED");
  // Held: does not start although the slot is free.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(StateOf(first), "QUEUED");
  CliResult released = Run({"release", first});
  EXPECT_EQ(released.exit_code, 0) << Describe(released);
  EXPECT_EQ(WaitEnded(first), "SUCCEEDED");
  EXPECT_EQ(WaitEnded(dependent), "SUCCEEDED");

  CliResult deleted = Run({"delete", first, blocker});
  EXPECT_EQ(deleted.exit_code, 0) << Describe(deleted);
  EXPECT_THAT(deleted.out, HasSubstr(first + " deleted ("));
  EXPECT_THAT(deleted.out, HasSubstr(blocker + " deleted ("));
  CliResult gone = Run({"show", first});
  EXPECT_EQ(gone.exit_code, 6);
  EXPECT_THAT(gone.err, HasSubstr("experiment " + first + " was deleted"));
  CliResult both = Run({"submit", "--preset", "tiny", "--after", first, "--after-ok", first});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--after and --after-ok exclude each other"));
}

TEST_F(CliQueueVerbsTest, LogsFollowPrintsUntilTheExperimentEnds) {
  const std::string blocker = SubmitTiny("hang");
  const std::string slow = SubmitTiny("slowlog");
  // Started while the experiment is still queued: waits, then prints every line as written.
  const std::string out = TempPath("follow.out");
  const std::string command =
      absl::StrCat(CliCommand({"logs", "--follow", slow, "--addr=" + daemon_->address()}, {}),
                   " > ", out, " 2>&1 & echo $!");
  CliResult started = RunShell(command);
  ASSERT_EQ(started.exit_code, 0);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_THAT(ReadWholeFile(out), Not(HasSubstr("line 1")));
  ASSERT_EQ(Run({"cancel", blocker}).exit_code, 0);
  // "line 1" arrives before the worker has written "line 5" (1.2 s later).
  std::string seen;
  for (int i = 0; i < 100 && !absl::StrContains(seen, "line 1"); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    seen = ReadWholeFile(out);
  }
  EXPECT_THAT(seen, HasSubstr("line 1"));
  EXPECT_THAT(seen, Not(HasSubstr("line 5")));
  EXPECT_EQ(WaitEnded(slow), "SUCCEEDED");
  // The follower ends by itself once the experiment ended, with the whole log.
  const pid_t follower = std::stoi(std::string(absl::StripAsciiWhitespace(started.out)));
  bool exited = false;
  for (int i = 0; i < 100 && !exited; ++i) {
    exited = kill(follower, 0) != 0;
    if (!exited) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(exited);
  EXPECT_EQ(ReadWholeFile(out), "line 1\nline 2\nline 3\nline 4\nline 5\n");
  // Without --follow: the same log, at once.
  EXPECT_EQ(Run({"logs", slow}).out, "line 1\nline 2\nline 3\nline 4\nline 5\n");
}

}  // namespace
}  // namespace vramlab::cli_test
