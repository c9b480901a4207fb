// Every vramlab command against a real vramlabd on loopback with the real worker (tiny preset,
// CPU): text output, --json output parsed into the proto types, exit codes and error lines.
#include <sys/stat.h>

#include <memory>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::cli_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using vramlab::v1::Experiment;

// One daemon for the suite (two CPU slots), with fault injection for the FAILED exit code.
class CliCommandsTest : public SharedDaemonTest<CliCommandsTest> {
 public:
  static std::vector<std::string> DaemonFlags() {
    return {"--cpu-slots=2", "--enable-fault-injection", "--cancel-grace-period=2s"};
  }

 protected:
  // vramlab with --addr of the suite's daemon.
  static CliResult Run(std::vector<std::string> args,
                       const std::map<std::string, std::string>& env = {}) {
    args.push_back("--addr=" + daemon_->address());
    return RunCli(args, env);
  }
  // A tiny CPU experiment (fp32, micro-batch 1, sequence 32) plus `extra` flags, submitted.
  static std::string SubmitTiny(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"submit",    "--preset", "tiny",    "--dtype", "fp32",
                                     "--seq-len", "32",       "--steps", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    auto lines = r.OutLines();
    return lines.empty() ? "" : lines[0];
  }
};

TEST_F(CliCommandsTest, ServerAnswersInTextAndJson) {
  CliResult text = Run({"server"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("vramlabd "));
  EXPECT_THAT(text.out, HasSubstr("device cpu"));
  EXPECT_THAT(text.out, HasSubstr("SLOT  DEVICE"));
  CliResult json = Run({"server", "--json"});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(ParseJson(json.out, info));
  EXPECT_EQ(info.device(), vramlab::v1::CPU);
  EXPECT_EQ(info.gpus_size(), 2);
  EXPECT_FALSE(info.version().empty());
}

TEST_F(CliCommandsTest, UnreachableDaemonIsOneLineAndExit6) {
  CliResult r = RunCli({"server", "--addr", "127.0.0.1:1", "--timeout", "5s"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("vramlab: UNAVAILABLE: cannot reach vramlabd at 127.0.0.1:1"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // The address can come from the environment too.
  CliResult env = RunCli({"ls"}, {{"VRAMLAB_ADDR", "127.0.0.1:1"}});
  EXPECT_EQ(env.exit_code, 6) << Describe(env);
}

TEST_F(CliCommandsTest, SubmitWaitThenShowListAndLogsAgree) {
  CliResult submitted = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "32",
                             "--steps", "2", "--name", "wait-me", "--wait"});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  const std::string id = submitted.OutLines().at(0);
  EXPECT_THAT(id, StartsWith("exp-"));
  EXPECT_THAT(submitted.out, HasSubstr(id + " SUCCEEDED"));
  EXPECT_THAT(submitted.out, HasSubstr("optimizer state"));

  CliResult show = Run({"show", id});
  ASSERT_EQ(show.exit_code, 0) << Describe(show);
  EXPECT_THAT(show.out, HasSubstr("name:          wait-me"));
  EXPECT_THAT(show.out, HasSubstr("state:         SUCCEEDED"));
  EXPECT_THAT(show.out, HasSubstr("settings:      tiny mb1 acc1 seq32 fp32 eager adamw"));
  EXPECT_THAT(show.out, HasSubstr("parameters:    125504"));
  EXPECT_THAT(show.out, HasSubstr("measured-predicted"));

  CliResult show_json = Run({"show", id, "--json"});
  Experiment experiment;
  ASSERT_TRUE(ParseJson(show_json.out, experiment));
  EXPECT_EQ(experiment.id(), id);
  EXPECT_EQ(experiment.state(), Experiment::SUCCEEDED);
  EXPECT_EQ(experiment.report().parameter_count(), 125504);
  // Exact bytes in JSON: weights of 125,504 fp32 parameters.
  EXPECT_EQ(experiment.report().anatomy().weights_bytes(), 125504 * 4);

  CliResult ls = Run({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << Describe(ls);
  EXPECT_THAT(ls.out, StartsWith("ID"));
  EXPECT_THAT(ls.out, HasSubstr("PEAK"));
  EXPECT_THAT(ls.out, HasSubstr(id + "  local  SUCCEEDED  wait-me"));
  CliResult ls_json = Run({"ls", "--json", "--state", "succeeded", "--owner", "local"});
  vramlab::v1::ListExperimentsResponse list;
  ASSERT_TRUE(ParseJson(ls_json.out, list));
  ASSERT_GE(list.experiments_size(), 1);
  for (const auto& e : list.experiments()) EXPECT_EQ(e.state(), Experiment::SUCCEEDED);
  CliResult none = Run({"ls", "--json", "--owner", "nobody-here"});
  ASSERT_TRUE(ParseJson(none.out, list));
  EXPECT_EQ(list.experiments_size(), 0);

  CliResult logs = Run({"logs", id});
  EXPECT_EQ(logs.exit_code, 0) << Describe(logs);
  CliResult logs_json = Run({"logs", id, "--json"});
  vramlab::v1::DataChunk chunk;
  ASSERT_TRUE(ParseJson(logs_json.out, chunk));
  EXPECT_EQ(chunk.data(), logs.out);
}

TEST_F(CliCommandsTest, WatchPrintsJsonLinesOrPlainLinesAndEndsWithTheAnatomy) {
  CliResult submitted = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "32",
                             "--steps", "2", "--accum", "2", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  Experiment experiment;
  ASSERT_TRUE(ParseJson(submitted.out, experiment));
  EXPECT_THAT(experiment.state(), ::testing::AnyOf(Experiment::QUEUED, Experiment::RUNNING));

  CliResult json = Run({"watch", experiment.id(), "--json"});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  int steps = 0, samples = 0;
  int64_t last_sequence = 0;
  for (const auto& line : json.OutLines()) {
    vramlab::v1::ExperimentEvent event;
    ASSERT_TRUE(ParseJson(line, event));
    EXPECT_GT(event.sequence(), last_sequence);
    last_sequence = event.sequence();
    if (event.worker_event().has_step()) ++steps;
    if (event.worker_event().has_sample()) ++samples;
  }
  EXPECT_EQ(steps, 2);
  EXPECT_GT(samples, 0);

  // Not a terminal: one plain line per update, no ANSI escapes.
  CliResult plain = Run({"watch", experiment.id()});
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  EXPECT_THAT(plain.out, HasSubstr(experiment.id() + " RUNNING on slot"));
  EXPECT_THAT(plain.out, HasSubstr(experiment.id() + " step 1/2 loss "));
  EXPECT_THAT(plain.out, HasSubstr(experiment.id() + " step 2/2 loss "));
  EXPECT_THAT(plain.out, HasSubstr(experiment.id() + " SUCCEEDED"));
  EXPECT_THAT(plain.out, HasSubstr("memory anatomy:"));
  EXPECT_THAT(plain.out, HasSubstr("activations"));
  EXPECT_EQ(plain.out.find('\x1b'), std::string::npos);
}

TEST_F(CliCommandsTest, SubmitWatchFollowsTheRunLive) {
  CliResult r = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "32", "--steps",
                     "1", "--watch"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::string id = r.OutLines().at(0);
  EXPECT_THAT(r.out, HasSubstr(id + " worker started"));
  EXPECT_THAT(r.out, HasSubstr(id + " step 1/1"));
  EXPECT_THAT(r.out, HasSubstr("memory anatomy:"));
}

TEST_F(CliCommandsTest, LiveViewRedrawsInPlaceOnATerminal) {
  const std::string id = SubmitTiny({"--steps", "3", "--seq-len", "64"});
  CliResult r = RunCliInTerminal({"watch", id, "--addr=" + daemon_->address()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // The live block is erased (cursor up N lines, clear to end) before each redraw.
  EXPECT_THAT(r.out, HasSubstr("\x1b[J"));
  EXPECT_THAT(r.out, HasSubstr("F\x1b[J"));
  EXPECT_THAT(r.out, HasSubstr("step 3/3 [########################]"));
  EXPECT_THAT(r.out, HasSubstr("  allocated "));
  EXPECT_THAT(r.out, HasSubstr("memory anatomy:"));
}

TEST_F(CliCommandsTest, OutcomesMapToExitCodes) {
  // OOM: a CPU limit far below what the tiny model's weights need.
  CliResult oom = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "32",
                       "--memory-limit", "256KiB", "--wait"});
  EXPECT_EQ(oom.exit_code, 3) << Describe(oom);
  const std::string oom_id = oom.OutLines().at(0);
  CliResult show = Run({"show", oom_id});
  EXPECT_THAT(show.out, HasSubstr("state:         OOM in "));
  EXPECT_THAT(show.out, HasSubstr("out of memory:"));
  CliResult watch_oom = Run({"watch", oom_id, "--quiet"});
  EXPECT_EQ(watch_oom.exit_code, 3) << Describe(watch_oom);

  // FAILED: the worker segfaults (test-only fault injection through a text-format spec file).
  const std::string spec = TempPath("segfault.txtpb");
  std::ofstream(spec) << "model { preset: \"tiny\" }\ntraining { seq_len: 32 dtype: FLOAT32 }\n"
                         "fault: SEGFAULT\n";
  CliResult failed = Run({"submit", "--spec", spec, "--wait"});
  EXPECT_EQ(failed.exit_code, 1) << Describe(failed);
  EXPECT_THAT(failed.out, HasSubstr("FAILED"));
}

TEST_F(CliCommandsTest, CancelQueuedAndRunningExperiments) {
  // Two long runs fill both slots; the third waits in the queue.
  const std::vector<std::string> long_run = {"--seq-len",     "64", "--steps", "10000",
                                             "--micro-batch", "4"};
  const std::string running_a = SubmitTiny(long_run);
  const std::string running_b = SubmitTiny(long_run);
  const std::string queued = SubmitTiny();
  auto stub = daemon_->NewStub();
  ASSERT_TRUE(vramlab::testing::WaitForState(*stub, running_a, Experiment::RUNNING).ok());
  ASSERT_TRUE(vramlab::testing::WaitForState(*stub, running_b, Experiment::RUNNING).ok());

  CliResult show = Run({"show", queued});
  EXPECT_THAT(show.out, HasSubstr("QUEUED (position 1 in queue)"));
  CliResult ls = Run({"ls", "--state", "queued"});
  EXPECT_THAT(ls.out, HasSubstr(queued));
  EXPECT_THAT(ls.out, ::testing::Not(HasSubstr(running_a)));

  CliResult cancel_queued = Run({"cancel", queued});
  ASSERT_EQ(cancel_queued.exit_code, 0) << Describe(cancel_queued);
  EXPECT_EQ(cancel_queued.out, queued + " CANCELLED\n");
  CliResult cancel_running = Run({"cancel", running_a, "--json"});
  ASSERT_EQ(cancel_running.exit_code, 0) << Describe(cancel_running);
  Experiment cancelled;
  ASSERT_TRUE(ParseJson(cancel_running.out, cancelled));
  EXPECT_EQ(cancelled.id(), running_a);
  EXPECT_EQ(Run({"cancel", running_b}).exit_code, 0);

  EXPECT_EQ(Run({"watch", queued, "--quiet"}).exit_code, 4);
  CliResult watched = Run({"watch", running_a});
  EXPECT_EQ(watched.exit_code, 4) << Describe(watched);
  EXPECT_THAT(watched.out, HasSubstr(running_a + " CANCELLED"));
  EXPECT_EQ(Run({"watch", running_b, "--quiet"}).exit_code, 4);

  // Cancelling what already ended is the daemon's FAILED_PRECONDITION.
  CliResult again = Run({"cancel", queued});
  EXPECT_EQ(again.exit_code, 6) << Describe(again);
  EXPECT_THAT(again.err, StartsWith("vramlab: FAILED_PRECONDITION: "));
}

TEST_F(CliCommandsTest, ErrorsAreOneReadableLineWithTheStatusCode) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string prefix;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {{"show", "exp-999999"}, 6, "vramlab: NOT_FOUND: ", "exp-999999"},
      {{"submit", "--preset", "tiny", "--seq-len", "200000"},
       2,
       "vramlab: INVALID_ARGUMENT: ",
       "training.seq_len"},
      {{"submit", "--preset", "no-such-model"}, 2, "vramlab: INVALID_ARGUMENT: ", "preset"},
      {{"submit", "--micro-batch", "four"}, 2, "vramlab: INVALID_ARGUMENT: --micro-batch", ""},
      {{"submit", "--bogus"}, 2, "vramlab: INVALID_ARGUMENT: unknown flag --bogus", ""},
      {{"submit", "--spec", "/nonexistent/spec.json"},
       2,
       "vramlab: INVALID_ARGUMENT: cannot read",
       "/nonexistent/spec.json"},
      {{"frobnicate"}, 2, "vramlab: INVALID_ARGUMENT: unknown command \"frobnicate\"", ""},
      {{"watch"},
       2,
       "vramlab: INVALID_ARGUMENT: vramlab watch needs exactly one experiment ID",
       ""},
      {{"compare", "exp-000001"},
       2,
       "vramlab: INVALID_ARGUMENT: vramlab compare needs at least two",
       ""},
      {{"report", "exp-000001", "--format", "pdf"}, 2, "vramlab: INVALID_ARGUMENT: --format", ""},
      {{"snapshot", "exp-000001"},
       2,
       "vramlab: INVALID_ARGUMENT: vramlab snapshot needs -o FILE",
       ""},
  };
  for (const auto& c : cases) {
    CliResult r = Run(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args[0] << "\n" << Describe(r);
    EXPECT_THAT(r.err, StartsWith(c.prefix)) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(c.detail));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << Describe(r);
  }
}

TEST_F(CliCommandsTest, EstimateTextAndJson) {
  const std::vector<std::string> flags = {"--preset",  "qwen2.5-1.5b", "--micro-batch",  "4",
                                          "--seq-len", "512",          "--memory-limit", "24GiB"};
  std::vector<std::string> text_args = {"estimate"};
  text_args.insert(text_args.end(), flags.begin(), flags.end());
  CliResult text = Run(text_args);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("parameters: 1543714304"));
  EXPECT_THAT(text.out, HasSubstr("limit:      24.00 GiB: "));
  EXPECT_THAT(text.out, HasSubstr("optimizer state"));
  text_args.push_back("--json");
  CliResult json = Run(text_args);
  vramlab::v1::MemoryEstimate estimate;
  ASSERT_TRUE(ParseJson(json.out, estimate));
  EXPECT_EQ(estimate.parameter_count(), 1543714304);
  EXPECT_EQ(estimate.limit_bytes(), int64_t{24} << 30);
  EXPECT_GT(estimate.predicted_peak_bytes(), estimate.anatomy().weights_bytes());
  // The three-way verdict, in words and in the message.
  EXPECT_NE(estimate.verdict(), vramlab::v1::FIT_VERDICT_UNSPECIFIED);
  EXPECT_GT(estimate.reserved_high_bytes(), estimate.reserved_low_bytes());
  EXPECT_THAT(text.out,
              ::testing::MatchesRegex(
                  "(.|\n)*\nlimit:      24.00 GiB: (FITS|TIGHT: within|DOES NOT FIT) (.|\n)*"));
}

// A sweep gets a prediction per point and the predicted first point not to fit (the issue's
// sweep: 1.5B, sdpa + checkpointing, 2 steps, 24 GiB); settings name the range, not seq 512.
TEST_F(CliCommandsTest, EstimateOfASweepPredictsEveryPoint) {
  const std::vector<std::string> args = {"estimate",
                                         "--preset",
                                         "qwen2.5-1.5b",
                                         "--attention",
                                         "sdpa",
                                         "--checkpointing",
                                         "all",
                                         "--steps",
                                         "2",
                                         "--memory-limit",
                                         "24GiB",
                                         "--sweep-seq-lens",
                                         "4096,6144,8192"};
  CliResult text = Run(args);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("sweep seq 4096,6144,8192"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("seq512")));
  EXPECT_THAT(text.out, HasSubstr("sweep, predicted per point"));
  EXPECT_THAT(text.out, HasSubstr("predicted first point not to fit: seq_len 8192\n"));
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  CliResult json = Run(json_args);
  vramlab::v1::MemoryEstimate estimate;
  ASSERT_TRUE(ParseJson(json.out, estimate)) << Describe(json);
  ASSERT_EQ(estimate.points_size(), 3);
  EXPECT_EQ(estimate.points(2).value(), 8192);
  EXPECT_NE(estimate.points(2).verdict(), vramlab::v1::FITS);
  EXPECT_EQ(estimate.predicted_first_oom_value(), 8192);
}

TEST_F(CliCommandsTest, SnapshotOfACpuRunIsAnErrorAndLeavesNoFile) {
  const std::string id = SubmitTiny({"--wait"});
  CliResult show = Run({"show", id, "--json"});
  Experiment experiment;
  ASSERT_TRUE(ParseJson(show.out, experiment));
  ASSERT_FALSE(experiment.has_snapshot());  // the counting CPU allocator keeps no history
  const std::string path = TempPath("snapshot.pickle");
  CliResult r = Run({"snapshot", id, "-o", path});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_THAT(r.err, StartsWith("vramlab: "));
  struct stat info;
  EXPECT_NE(stat(path.c_str(), &info), 0) << "a failed download must not leave " << path;
}

TEST_F(CliCommandsTest, RequestIdMakesResubmissionIdempotent) {
  const std::string first = SubmitTiny({"--request-id", "cli-test-idempotent-1"});
  const std::string second = SubmitTiny({"--request-id", "cli-test-idempotent-1"});
  EXPECT_EQ(first, second);
  const std::string third = SubmitTiny();
  EXPECT_NE(first, third);
}

TEST_F(CliCommandsTest, CompareShowsEachExperimentAndTheDifference) {
  const std::string a = SubmitTiny({"--micro-batch", "4", "--wait"});
  const std::string b = SubmitTiny({"--micro-batch", "1", "--accum", "4", "--wait"});
  CliResult r = Run({"compare", a, b});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr(a + "  -     SUCCEEDED"));
  EXPECT_THAT(r.out, HasSubstr(b + " vs " + a));
  // One step each: the warm-up alone, so no speed to compare, and the table says what it rests on.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("step time \\(steady\\) +- +- +-\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("tokens/s +- +- +-\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("steady steps +0 +0 *\n"));
  CliResult show = Run({"show", a});
  ASSERT_EQ(show.exit_code, 0) << Describe(show);
  EXPECT_THAT(show.out,
              ::testing::ContainsRegex(
                  "step time: +no steady step \\(the warm-up step took [0-9.]+ m?s\\)\n"));
  EXPECT_THAT(show.out, ::testing::ContainsRegex("tokens/s: +-\n"));
  CliResult json = Run({"compare", a, b, "--json"});
  vramlab::v1::ListExperimentsResponse list;
  ASSERT_TRUE(ParseJson(json.out, list));
  ASSERT_EQ(list.experiments_size(), 2);
  EXPECT_EQ(list.experiments(0).id(), a);
  // Accumulation keeps weights, gradients and optimizer state and shrinks the activations.
  const auto& big = list.experiments(0).report().anatomy();
  const auto& small = list.experiments(1).report().anatomy();
  EXPECT_EQ(big.weights_bytes(), small.weights_bytes());
  EXPECT_EQ(big.optimizer_state_bytes(), small.optimizer_state_bytes());
  EXPECT_GT(big.activations_bytes(), small.activations_bytes());
}

TEST_F(CliCommandsTest, ReadyMadeCpuExperimentsRunAsDescribed) {
  const std::string dir = std::string(VRAMLAB_SOURCE_DIR) + "/experiments/cpu/";
  CliResult sad = Run({"submit", "--spec", dir + "01-basic-sad-path.json", "--wait"});
  EXPECT_EQ(sad.exit_code, 3) << Describe(sad);
  CliResult happy = Run({"submit", "--spec", dir + "02-basic-happy-path.json", "--wait"});
  EXPECT_EQ(happy.exit_code, 0) << Describe(happy);
}

}  // namespace
}  // namespace vramlab::cli_test
