// Command experiments (spec.command, docs/COMMANDS.md) against a real daemon: Debian's
// python3-torch runs a small training script (testdata/tiny_train.py) as the unprivileged
// --command-user, and the probe inside it streams the worker's events: samples, phases, steps and
// an anatomy whose weights, gradients and optimizer state equal what the script counts itself.
// Cancel and the time limit kill the whole process group; an allocation refused under the CPU
// data cap is an OOM in the phase it happened; every refusal names its rule (commands off, a
// program or working directory outside --allowed-dir, a user without the commands role, root).
#include "tests/command/command_fixture.h"

namespace vramlab::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::v1::Experiment;

TEST_F(DaemonCommandTest, TrainingScriptStreamsSamplesPhasesStepsAndAnatomy) {
  auto daemon = StartDaemon();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  // The program through a link, as a virtual environment's bin/python3 is: it runs with argv[0]
  // as given (Python finds its environment from it), the file it names checked and executed.
  const std::string link = jobs_ + "/python3";
  fs::create_symlink(kPython, link);
  vramlab::v1::ExperimentSpec spec =
      Command({"--steps", "3", "--accum", "2", "--hidden", "256", "--sleep-per-step", "0.1"});
  spec.mutable_command()->set_argv(0, link);
  auto submitted = Submit(*stub, spec, kBob);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto done = WaitForFinalState(*stub, submitted->id(), absl::Seconds(180), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  const std::string log = Log(**daemon, submitted->id());
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason() << "\n" << log;
  EXPECT_EQ(done->worker_exit_status(), 0);
  EXPECT_FALSE(done->has_prediction()) << "no equivalent spec, no prediction";

  // It ran as the command user, with none of the daemon's environment.
  struct passwd* user = getpwnam(kCommandUser);
  ASSERT_NE(user, nullptr);
  EXPECT_THAT(log, HasSubstr("uid " + std::to_string(user->pw_uid) + "\n"));
  EXPECT_THAT(log, Not(HasSubstr(kDaemonSecretName)));
  EXPECT_THAT(log, HasSubstr("executable " + link + "\n"));

  auto events = WatchAll(*stub, submitted->id(), 0, absl::Seconds(60), kBob);
  ASSERT_TRUE(events.ok()) << events.status();
  int samples = 0, steps = 0, started = 0;
  std::map<std::pair<int, int>, int> edges;  // (phase, edge) -> count
  std::optional<vramlab::v1::FinalReport> report;
  for (const auto& event : *events) {
    if (!event.has_worker_event()) continue;
    const auto& worker = event.worker_event();
    if (worker.has_sample()) ++samples;
    if (worker.has_started()) {
      ++started;
      EXPECT_EQ(worker.started().device(), vramlab::v1::CPU);
      EXPECT_FALSE(worker.started().torch_version().empty());
    }
    if (worker.has_phase()) ++edges[{worker.phase().phase(), worker.phase().edge()}];
    if (worker.has_step()) {
      EXPECT_EQ(worker.step().step(), steps);
      EXPECT_GT(worker.step().loss(), 0.0);
      EXPECT_GT(worker.step().peak_allocated_bytes(), 0);
      ++steps;
    }
    if (worker.has_report()) report = worker.report();
  }
  EXPECT_EQ(started, 1);
  EXPECT_GT(samples, 0);
  EXPECT_EQ(steps, 3);
  // Two micro-batches per step: six forwards and backwards, three optimizer steps.
  for (auto phase : {vramlab::v1::FORWARD, vramlab::v1::BACKWARD}) {
    EXPECT_EQ((edges[{phase, vramlab::v1::BEGIN}]), 6) << vramlab::v1::Phase_Name(phase);
    EXPECT_EQ((edges[{phase, vramlab::v1::END}]), 6) << vramlab::v1::Phase_Name(phase);
  }
  EXPECT_EQ((edges[{vramlab::v1::OPTIMIZER_STEP, vramlab::v1::BEGIN}]), 3);
  EXPECT_EQ((edges[{vramlab::v1::OPTIMIZER_STEP, vramlab::v1::END}]), 3);

  ASSERT_TRUE(report.has_value());
  ASSERT_TRUE(done->has_report());
  const std::map<std::string, int64_t> facts = Facts(log);
  ASSERT_TRUE(facts.count("parameter_bytes")) << log;
  const auto& anatomy = done->report().anatomy();
  EXPECT_EQ(anatomy.weights_bytes(), facts.at("parameter_bytes"));
  EXPECT_EQ(anatomy.gradients_bytes(), facts.at("gradient_bytes"));
  EXPECT_EQ(anatomy.optimizer_state_bytes(), facts.at("optimizer_state_bytes"));
  EXPECT_EQ(done->report().parameter_count(), facts.at("parameter_count"));
  // The peak moment's categories sum to its allocated bytes, which is the run's peak.
  const auto& peak = anatomy.at_peak_allocated();
  const auto& c = peak.categories();
  EXPECT_GT(peak.allocated_bytes(), 0);
  EXPECT_EQ(c.weights_bytes() + c.gradients_bytes() + c.optimizer_state_bytes() +
                c.activations_bytes() + c.temporaries_bytes(),
            peak.allocated_bytes());
  EXPECT_EQ(anatomy.peak_allocated_bytes(), peak.allocated_bytes());
  EXPECT_NE(peak.phase(), vramlab::v1::PHASE_UNSPECIFIED);
  EXPECT_GT(done->report().median_step_time_seconds(), 0.0);
}

// The job's children: one in its process group, one in a session of its own (found by the tag
// in its environment), one in a session of its own with an empty environment (found by the job's
// cgroup alone).
struct JobChildren {
  pid_t child = 0;
  pid_t escaped = 0;
  pid_t cleared = 0;
};

TEST_F(DaemonCommandTest, CancelAndTimeLimitKillTheWholeProcessGroup) {
  auto daemon = StartDaemon();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  const std::vector<std::string> forever = {"--steps",
                                            "100000",
                                            "--hidden",
                                            "64",
                                            "--sleep-per-step",
                                            "0.5",
                                            "--spawn-child",
                                            "--spawn-escaped-child",
                                            "--spawn-cleared-child"};
  auto children_of = [&](const std::string& id) {
    JobChildren children{WaitForChild(**daemon, id), WaitForChild(**daemon, id, "escaped"),
                         WaitForChild(**daemon, id, "cleared")};
    EXPECT_GT(children.child, 0) << Log(**daemon, id);
    EXPECT_GT(children.escaped, 0) << Log(**daemon, id);
    EXPECT_GT(children.cleared, 0) << Log(**daemon, id);
    EXPECT_FALSE(ProcessGone(children.child));
    EXPECT_FALSE(ProcessGone(children.escaped));
    EXPECT_FALSE(ProcessGone(children.cleared));
    return children;
  };
  // The final state is reported once the job's processes are gone, so none may be seen after it.
  auto expect_gone = [&](const JobChildren& children, const std::string& id,
                         const std::string& after) {
    EXPECT_TRUE(ProcessGone(children.child))
        << "the job's child " << children.child << " outlived " << after << "\n"
        << Log(**daemon, id);
    EXPECT_TRUE(ProcessGone(children.escaped)) << "the job's child in its own session "
                                               << children.escaped << " outlived " << after << "\n"
                                               << Log(**daemon, id);
    EXPECT_TRUE(ProcessGone(children.cleared))
        << "the job's child in its own session with an empty environment " << children.cleared
        << " outlived " << after << "\n"
        << Log(**daemon, id);
  };
  auto cancelled = Submit(*stub, Command(forever), kBob);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  JobChildren children = children_of(cancelled->id());
  ASSERT_TRUE(Cancel(*stub, cancelled->id(), kBob).ok());
  auto done = WaitForFinalState(*stub, cancelled->id(), absl::Seconds(60), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
  expect_gone(children, cancelled->id(), "the cancel");

  vramlab::v1::ExperimentSpec limited = Command(forever);
  limited.set_time_limit_seconds(4);
  auto timed = Submit(*stub, limited, kBob);
  ASSERT_TRUE(timed.ok()) << timed.status();
  children = children_of(timed->id());
  done = WaitForFinalState(*stub, timed->id(), absl::Seconds(60), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::FAILED);
  EXPECT_THAT(done->state_reason(), HasSubstr("time limit of 4 s"));
  expect_gone(children, timed->id(), "the time limit");

  // A program that ends leaves nothing running either.
  auto ended = Submit(*stub,
                      Command({"--steps", "1", "--hidden", "64", "--spawn-child",
                               "--spawn-escaped-child", "--spawn-cleared-child"}),
                      kBob);
  ASSERT_TRUE(ended.ok()) << ended.status();
  done = WaitForFinalState(*stub, ended->id(), absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
  children = {WaitForChild(**daemon, ended->id()), WaitForChild(**daemon, ended->id(), "escaped"),
              WaitForChild(**daemon, ended->id(), "cleared")};
  ASSERT_GT(children.escaped, 0) << Log(**daemon, ended->id());
  ASSERT_GT(children.cleared, 0) << Log(**daemon, ended->id());
  EXPECT_THAT(Log(**daemon, ended->id()), Not(HasSubstr("no cgroup for this job")));
  expect_gone(children, ended->id(), "its program");

  // The daemon's shutdown stops a running command's group too.
  auto running = Submit(*stub, Command(forever), kBob);
  ASSERT_TRUE(running.ok()) << running.status();
  children = children_of(running->id());
  auto stopped = (*daemon)->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  expect_gone(children, running->id(), "the daemon");
}

TEST_F(DaemonCommandTest, ExitCodeAndCpuDataCapDecideTheOutcome) {
  auto daemon = StartDaemon();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  // With an equivalent spec the command is predicted as that spec.
  vramlab::v1::ExperimentSpec failing = Command({"--steps", "2", "--hidden", "64", "--fail"});
  failing.mutable_command()->set_has_equivalent_spec(true);
  failing.mutable_model()->set_preset("tiny");
  failing.mutable_training()->set_seq_len(32);
  auto failed = Submit(*stub, failing, kBob);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_TRUE(failed->has_prediction());
  EXPECT_GT(failed->prediction().anatomy().weights_bytes(), 0);
  auto done = WaitForFinalState(*stub, failed->id(), absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::FAILED);
  EXPECT_EQ(done->state_reason(), "command exited with code 1");

  // Under a 64 MiB cap a batch of 40,000 x 256 fp32 inputs (41 MB) fits; the first layer's
  // 40,000 x 512 output (82 MB) does not.
  vramlab::v1::ExperimentSpec oom = Command({"--steps", "1", "--batch", "40000"});
  oom.mutable_memory()->set_device_memory_limit_bytes(64ll << 20);
  auto submitted = Submit(*stub, oom, kBob);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  done = WaitForFinalState(*stub, submitted->id(), absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), Experiment::OOM) << done->state_reason() << "\n"
                                            << Log(**daemon, submitted->id());
  EXPECT_EQ(done->oom().phase(), vramlab::v1::FORWARD);
  EXPECT_EQ(done->oom().step(), 0);
  EXPECT_GT(done->oom().requested_bytes(), 64ll << 20);
  EXPECT_THAT(done->oom().message(), HasSubstr("allocate"));
}

// A Python program that never imports torch reports its peak resident set through the probe; a
// program that is not Python says nothing, and on a CPU slot the daemon has no driver to read.
TEST_F(DaemonCommandTest, ProgramsWithoutTorchReportWhatCanBeSeenOfThem) {
  auto daemon = StartDaemon();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  vramlab::v1::ExperimentSpec plain_python;
  plain_python.set_name("no torch");
  plain_python.mutable_command()->add_argv(kPython);
  plain_python.mutable_command()->add_argv("-c");
  plain_python.mutable_command()->add_argv("block = b\"x\" * (64 << 20)");
  plain_python.mutable_command()->set_working_dir(jobs_);
  auto done = SubmitAndWaitForFinalState(*stub, plain_python, absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
  ASSERT_TRUE(done->has_report());
  EXPECT_EQ(done->report().measured_by(), vramlab::v1::FinalReport::PROCESS_RESIDENT_SET);
  EXPECT_GE(done->report().anatomy().peak_device_used_bytes(), 64ll << 20);

  vramlab::v1::ExperimentSpec not_python;
  not_python.set_name("not python");
  not_python.mutable_command()->add_argv("/usr/bin/sleep");
  not_python.mutable_command()->add_argv("0.2");
  not_python.mutable_command()->set_working_dir(jobs_);
  done = SubmitAndWaitForFinalState(*stub, not_python, absl::Seconds(120), kBob);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason();
  EXPECT_FALSE(done->has_report());
  auto events = WatchAll(*stub, done->id(), 0, absl::Seconds(60), kBob);
  ASSERT_TRUE(events.ok()) << events.status();
  for (const auto& event : *events) EXPECT_FALSE(event.has_worker_event()) << event.DebugString();
}

TEST_F(DaemonCommandTest, RefusalsNameTheirRule) {
  {
    // Commands off (the default).
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1", "--auth-tokens=" + tokens_, "--allowed-dir=" + jobs_}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    auto stub = (*daemon)->NewStub();
    auto refused = Submit(*stub, Command({}), kBob);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(refused.status().message(), HasSubstr("--allow-commands"));
  }
  auto daemon = StartDaemon();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  // A user whose role lacks ",commands".
  auto refused = Submit(*stub, Command({}), kAlice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("user alice may not run commands"));
  // A program outside the allowed directories.
  vramlab::v1::ExperimentSpec outside = Command({});
  outside.mutable_command()->set_argv(0, "/usr/sbin/nologin");
  refused = Submit(*stub, outside, kBob);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.argv[0]"));
  // A working directory outside them.
  outside = Command({});
  outside.mutable_command()->set_working_dir("/etc");
  refused = Submit(*stub, outside, kBob);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.working_dir"));
  // Names the daemon sets; a relative program; model fields without has_equivalent_spec.
  vramlab::v1::ExperimentSpec bad = Command({});
  bad.mutable_command()->add_env("CUDA_VISIBLE_DEVICES=0");
  refused = Submit(*stub, bad, kBob);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.env[0]: CUDA_VISIBLE_DEVICES"));
  bad = Command({});
  bad.mutable_command()->set_argv(0, "python3");
  refused = Submit(*stub, bad, kBob);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.argv[0]: must be an absolute"));
  bad = Command({});
  bad.mutable_model()->set_preset("tiny");
  refused = Submit(*stub, bad, kBob);
  EXPECT_THAT(refused.status().message(), HasSubstr("spec.command.has_equivalent_spec"));
}

// vramlabd refuses to start when commands would run as root or without a user.
TEST_F(DaemonCommandTest, DaemonRefusesRootAsTheCommandUser) {
  const std::string data = dir_ + "/data";
  for (const auto& [flags, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--allow-commands --command-user=root", "commands never run as root"},
           {"--allow-commands", "--allow-commands needs --command-user"},
           {"--command-user=nobody", "--command-user has no effect without --allow-commands"}}) {
    std::vector<std::string> argv = {DaemonHarness::BinDir() + "/vramlabd", "--device=cpu",
                                     "--data-dir=" + data, "--listen=127.0.0.1:0"};
    for (absl::string_view flag : absl::StrSplit(flags, ' ')) argv.emplace_back(flag);
    const ChildResult ended = RunChild({.argv = argv, .stderr_with_stdout = true});
    const std::string& text = ended.out;
    EXPECT_EQ(ended.exit_code, 2) << flags << ": " << text;
    EXPECT_THAT(text, HasSubstr(expected)) << flags;
  }
}

}  // namespace
}  // namespace vramlab::testing
