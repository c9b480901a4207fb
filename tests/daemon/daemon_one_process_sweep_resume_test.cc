// kill -9 of the daemon during a one-process sweep, restarted on the same store with
// --requeue-interrupted (a real daemon on loopback with one CPU slot and the real worker: preset
// "tiny", FLOAT32): the point the worker had ended before the kill is taken from the stored events
// and not run again, the point the kill cut runs again as a worker of its own, and so does each
// point after it; the sweep ends with an uninterrupted run's results of the same spec, its event
// stream and `vramlab watch` show each point's result once, and `vramlab show` says how many
// points were taken. A LIST without a limit, a SEARCH_MAX whose answer needs a point out of memory
// after the restart, and a LIST that stops out of memory after the restart.
//
// The limits are not constants: they come from the peaks the LIST's uninterrupted run measures.
#include <signal.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/rank_pids.h"
#include "tests/support/shared_daemon.h"
#include "tests/support/stored_events.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;
using vramlab::v1::ExperimentSpec;

const std::vector<int> kValues = {32, 64, 96, 128};
// Steps of every point: enough that the kill, as soon as the worker has trained a step of a
// point, lands well before that point's end.
constexpr int kSteps = 8;

// The peak allocated at each value, measured by the first test.
std::map<int, int64_t> measured_peaks;

// A one-process sweep: micro-batch 2, `kSteps` steps a point, a LIST over `seq_lens` (none: the
// caller sets the sweep), under `limit` bytes (0: none).
ExperimentSpec OneProcessSweep(const std::vector<int>& seq_lens, int64_t limit) {
  ExperimentSpec spec = TinySpec(/*seq_len=*/32, kSteps);
  spec.mutable_training()->set_micro_batch_size(2);
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  for (int value : seq_lens) spec.mutable_sweep()->add_values(value);
  spec.mutable_memory()->set_device_memory_limit_bytes(limit);
  return spec;
}

// Follows `id`'s events until the worker has sent a step of point `index`: that event's sequence,
// or 0 when the watch ends or a minute passes first.
int64_t WaitForAStepOf(vramlab::v1::VramlabService::Stub& stub, const std::string& id, int index) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  vramlab::v1::WatchExperimentRequest request;
  request.set_id(id);
  auto reader = stub.WatchExperiment(&context, request);
  ExperimentEvent event;
  int64_t stepped = 0;
  while (stepped == 0 && reader->Read(&event)) {
    if (event.has_worker_event() && event.worker_event().has_step() &&
        event.worker_event().step().sweep_index() == index) {
      stepped = event.sequence();
    }
  }
  context.TryCancel();
  (void)reader->Finish();
  return stepped;
}

// The pid of `id`'s latest worker in the daemon's log ("ID started (worker pid P)"); -1 if none.
pid_t LatestWorkerPid(const DaemonHarness& daemon, const std::string& id) {
  const std::string log = daemon.ReadLog();
  const std::regex line(id + " started \\(worker pid ([0-9]+)\\)");
  pid_t pid = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    pid = static_cast<pid_t>(std::stol((*it)[1]));
  }
  return pid;
}

// One launch of the experiment, as its stored events show it: from a RUNNING state change to the
// next.
struct Attempt {
  int workers_started = 0;     // `started` events
  std::map<int, int> results;  // `sweepPoint` events, by point
  std::set<int> stepped;       // the points it stored a step of
  std::string reason;          // its RUNNING state change's
};

std::vector<Attempt> AttemptsOf(const std::vector<ExperimentEvent>& events) {
  std::vector<Attempt> attempts;
  for (const ExperimentEvent& event : events) {
    if (event.has_state_change() && event.state_change().state() == Experiment::RUNNING) {
      attempts.emplace_back();
      attempts.back().reason = event.state_change().reason();
    }
    if (!event.has_worker_event() || attempts.empty()) continue;
    const auto& worker = event.worker_event();
    Attempt& attempt = attempts.back();
    if (worker.has_started()) ++attempt.workers_started;
    if (worker.has_sweep_point()) ++attempt.results[worker.sweep_point().sweep_index()];
    if (worker.has_step()) attempt.stepped.insert(worker.step().sweep_index());
  }
  return attempts;
}

// A resumed sweep's results against an uninterrupted one's: the same end, the same points, the
// same answer, and at each point that fit the same peak (measured the same from run to run) and
// loss.
void ExpectSameResults(const Experiment& resumed, const Experiment& uninterrupted) {
  EXPECT_EQ(resumed.state(), uninterrupted.state());
  EXPECT_EQ(resumed.state_reason(), uninterrupted.state_reason());
  EXPECT_EQ(resumed.worker_exit_status(), uninterrupted.worker_exit_status());
  EXPECT_EQ(resumed.ranks_size(), 0);
  EXPECT_FALSE(resumed.has_deciding_rank());
  const vramlab::v1::FinalReport& got = resumed.report();
  const vramlab::v1::FinalReport& want = uninterrupted.report();
  EXPECT_EQ(got.largest_fitting_value(), want.largest_fitting_value());
  EXPECT_EQ(got.anatomy().peak_allocated_bytes(), want.anatomy().peak_allocated_bytes());
  EXPECT_NEAR(got.final_loss(), want.final_loss(), 1e-6);
  EXPECT_EQ(got.attention_backend(), want.attention_backend());
  EXPECT_EQ(got.parameter_count(), want.parameter_count());
  EXPECT_EQ(got.device_name(), want.device_name());
  ASSERT_EQ(got.sweep_points_size(), want.sweep_points_size());
  for (int i = 0; i < got.sweep_points_size(); ++i) {
    const auto& point = got.sweep_points(i);
    const auto& want_point = want.sweep_points(i);
    EXPECT_EQ(point.sweep_index(), want_point.sweep_index());
    EXPECT_EQ(point.value(), want_point.value()) << "point " << i;
    EXPECT_EQ(point.oom(), want_point.oom()) << "point " << i;
    EXPECT_EQ(point.attention_backend(), want_point.attention_backend()) << "point " << i;
    if (point.oom()) continue;
    EXPECT_EQ(point.anatomy().peak_allocated_bytes(), want_point.anatomy().peak_allocated_bytes())
        << "point " << i;
    EXPECT_NEAR(point.final_loss(), want_point.final_loss(), 1e-6) << "point " << i;
  }
  EXPECT_EQ(resumed.has_oom(), uninterrupted.has_oom());
  EXPECT_EQ(resumed.oom().sweep_index(), uninterrupted.oom().sweep_index());
  EXPECT_EQ(resumed.oom().phase(), uninterrupted.oom().phase());
}

class DaemonOneProcessSweepResumeTest : public SharedDaemonSuite<DaemonOneProcessSweepResumeTest> {
 public:
  static std::vector<std::string> DaemonFlags() {
    return {"--cpu-slots=1", "--requeue-interrupted"};
  }

 protected:
  static int64_t LimitBetween(int fits, int fails) {
    EXPECT_TRUE(measured_peaks.count(fits) && measured_peaks.count(fails))
        << "the first test measures the peaks";
    EXPECT_LT(measured_peaks[fits], measured_peaks[fails]);
    return (measured_peaks[fits] + measured_peaks[fails]) / 2;
  }

  void RunToTheEnd(const ExperimentSpec& spec, Experiment* done) {
    auto ended = SubmitAndWaitForFinalState(*stub_, spec);
    ASSERT_TRUE(ended.ok()) << ended.status();
    *done = *ended;
  }

  // Submits `spec`, kills the daemon (SIGKILL) once the worker has trained a step of point 1,
  // restarts it on the same store and waits for the sweep's end. `*before` gets the log of the
  // daemon that was killed.
  void RunKilledDuringSecondPoint(const ExperimentSpec& spec, Experiment* done,
                                  std::string* before) {
    auto submitted = Submit(*stub_, spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    const std::string id = submitted->id();
    const int64_t step = WaitForAStepOf(*stub_, id, 1);
    ASSERT_GT(step, 0) << daemon_->ReadLog();
    ASSERT_TRUE(WaitUntilStored(*daemon_, id, step)) << daemon_->ReadLog();
    const pid_t worker = LatestWorkerPid(*daemon_, id);
    ASSERT_GT(worker, 0) << daemon_->ReadLog();
    ASSERT_TRUE(daemon_->Kill().ok());
    *before = daemon_->ReadLog();
    EXPECT_TRUE(Gone(worker)) << "the worker dies with the daemon";
    ASSERT_TRUE(daemon_->Restart().ok());
    stub_ = daemon_->NewStub();
    auto ended = WaitForFinalState(*stub_, id, absl::Seconds(300));
    ASSERT_TRUE(ended.ok()) << ended.status();
    *done = *ended;
  }

  // What the stored events, the logs and the CLI show of a sweep killed during point 1: point 0
  // ended before the kill and is the one point taken; after the restart point 0 did not run
  // again, point 1 did, and then every further point, `points` in all, each in its own worker;
  // each point's result is in the stream once.
  void ExpectPointZeroTakenAndTheRestRunAlone(const Experiment& done, const std::string& before,
                                              int points) {
    const std::string& id = done.id();
    auto events = WatchAll(*stub_, id);
    ASSERT_TRUE(events.ok()) << events.status();
    const std::vector<Attempt> attempts = AttemptsOf(*events);
    ASSERT_EQ(attempts.size(), 2u);
    EXPECT_EQ(attempts[0].workers_started, 1) << "one worker for the whole sweep";
    EXPECT_EQ(attempts[0].results, (std::map<int, int>{{0, 1}})) << "killed while point 1 trained";
    EXPECT_EQ(attempts[1].workers_started, points - 1) << "a worker for every point but 0";
    EXPECT_EQ(attempts[1].stepped.count(0), 0u) << "point 0 does not train again";
    EXPECT_EQ(attempts[1].results.count(0), 0u);
    EXPECT_EQ(attempts[1].reason, "1 sweep point taken from before the restart");
    std::map<int, int> results;
    for (const Attempt& attempt : attempts) {
      for (const auto& [index, count] : attempt.results) results[index] += count;
    }
    ASSERT_EQ(static_cast<int>(results.size()), points);
    for (const auto& [index, count] : results) EXPECT_EQ(count, 1) << "point " << index;
    EXPECT_EQ(done.resumed_sweep_points(), 1);
    EXPECT_EQ(done.attempts(), 1);

    const std::string after = daemon_->ReadLog();
    EXPECT_EQ(before.find(absl::StrCat(id, " point ")), std::string::npos)
        << "the first attempt ran the sweep in one worker";
    EXPECT_EQ(after.find(absl::StrCat(id, " point 0 (")), std::string::npos) << after;
    EXPECT_NE(after.find(absl::StrCat(id, ": 1 sweep point taken from before the restart")),
              std::string::npos)
        << after;
    EXPECT_NE(after.find(absl::StrCat(id, " point 1 (SEQ_LEN ")), std::string::npos) << after;

    // `vramlab watch` (its history, the run having ended) shows each point's result once;
    // `vramlab show` says how many points were taken.
    const std::string address = "--addr=" + daemon_->address();
    const cli_test::CliResult watch = cli_test::RunCli({"watch", id, address});
    for (const auto& [index, count] : results) {
      const std::string line = absl::StrCat(id, " sweep point ", index + 1, " seq_len=");
      size_t shown = 0;
      for (size_t at = watch.out.find(line); at != std::string::npos;
           at = watch.out.find(line, at + 1)) {
        ++shown;
      }
      EXPECT_EQ(shown, 1u) << "point " << index << "\n" << cli_test::Describe(watch);
    }
    const cli_test::CliResult show = cli_test::RunCli({"show", id, address});
    EXPECT_NE(show.out.find("1 sweep point taken from before the restart (point 1)"),
              std::string::npos)
        << cli_test::Describe(show);
  }
};

TEST_F(DaemonOneProcessSweepResumeTest, AListKilledDuringItsSecondPointResumesWithTheFirstTaken) {
  const ExperimentSpec spec = OneProcessSweep(kValues, /*limit=*/0);
  Experiment uninterrupted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(spec, &uninterrupted));
  ASSERT_EQ(uninterrupted.state(), Experiment::SUCCEEDED) << uninterrupted.state_reason();
  ASSERT_EQ(uninterrupted.report().sweep_points_size(), 4);
  for (const auto& point : uninterrupted.report().sweep_points()) {
    measured_peaks[point.value()] = point.anatomy().peak_allocated_bytes();
    std::fprintf(stderr, "seq_len %d: peak %lld bytes, %.3f s/step\n", point.value(),
                 static_cast<long long>(point.anatomy().peak_allocated_bytes()),
                 point.step_time_seconds());
  }

  Experiment resumed;
  std::string before;
  ASSERT_NO_FATAL_FAILURE(RunKilledDuringSecondPoint(spec, &resumed, &before));
  ASSERT_EQ(resumed.state(), Experiment::SUCCEEDED) << resumed.state_reason() << "\n"
                                                    << daemon_->ReadLog();
  ExpectSameResults(resumed, uninterrupted);
  ASSERT_NO_FATAL_FAILURE(ExpectPointZeroTakenAndTheRestRunAlone(resumed, before, 4));
}

// SEARCH_MAX over 32 .. 128 by 32 under a limit between the peaks at 96 and 128: 64 fits, 96
// fits, 128 runs out; its answer is 96. Killed while 96 trains, resumed with 64 taken.
TEST_F(DaemonOneProcessSweepResumeTest, ASearchKilledDuringItsSecondPointResumesToTheSameAnswer) {
  ExperimentSpec spec = OneProcessSweep({}, LimitBetween(96, 128));
  auto* sweep = spec.mutable_sweep();
  sweep->set_mode(vramlab::v1::SEARCH_MAX);
  sweep->set_search_min(32);
  sweep->set_search_max(128);
  sweep->set_search_granularity(32);
  // The bisection's order, whatever the estimate predicts (a search from the prediction resumes
  // by the same plan: server/engine/sweep_resume_one_process_test.cc).
  sweep->set_plain_bisection(true);
  Experiment uninterrupted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(spec, &uninterrupted));
  ASSERT_EQ(uninterrupted.state(), Experiment::SUCCEEDED) << uninterrupted.state_reason();
  ASSERT_EQ(uninterrupted.report().sweep_points_size(), 3);
  EXPECT_EQ(uninterrupted.report().sweep_points(0).value(), 64);
  EXPECT_EQ(uninterrupted.report().sweep_points(1).value(), 96);
  EXPECT_EQ(uninterrupted.report().sweep_points(2).value(), 128);
  EXPECT_TRUE(uninterrupted.report().sweep_points(2).oom());
  EXPECT_EQ(uninterrupted.report().largest_fitting_value(), 96);

  Experiment resumed;
  std::string before;
  ASSERT_NO_FATAL_FAILURE(RunKilledDuringSecondPoint(spec, &resumed, &before));
  ASSERT_EQ(resumed.state(), Experiment::SUCCEEDED) << resumed.state_reason() << "\n"
                                                    << daemon_->ReadLog();
  ExpectSameResults(resumed, uninterrupted);
  EXPECT_EQ(resumed.oom().sweep_index(), 2);
  ASSERT_NO_FATAL_FAILURE(ExpectPointZeroTakenAndTheRestRunAlone(resumed, before, 3));
}

// The LIST under a limit between the peaks at 64 and 96: 32 and 64 fit, 96 runs out and the
// sweep stops there, OOM. Killed while 64 trains.
TEST_F(DaemonOneProcessSweepResumeTest, AListKilledBeforeItRunsOutEndsOutOfMemoryAtTheSamePoint) {
  const ExperimentSpec spec = OneProcessSweep(kValues, LimitBetween(64, 96));
  Experiment uninterrupted;
  ASSERT_NO_FATAL_FAILURE(RunToTheEnd(spec, &uninterrupted));
  ASSERT_EQ(uninterrupted.state(), Experiment::OOM) << uninterrupted.state_reason();
  ASSERT_EQ(uninterrupted.report().sweep_points_size(), 3);
  EXPECT_TRUE(uninterrupted.report().sweep_points(2).oom());

  Experiment resumed;
  std::string before;
  ASSERT_NO_FATAL_FAILURE(RunKilledDuringSecondPoint(spec, &resumed, &before));
  ASSERT_EQ(resumed.state(), Experiment::OOM) << resumed.state_reason() << "\n"
                                              << daemon_->ReadLog();
  ExpectSameResults(resumed, uninterrupted);
  EXPECT_EQ(resumed.worker_exit_status(), 3);
  EXPECT_EQ(resumed.oom().sweep_index(), 2);
  ASSERT_NO_FATAL_FAILURE(ExpectPointZeroTakenAndTheRestRunAlone(resumed, before, 3));
}

}  // namespace
}  // namespace vramlab::testing
