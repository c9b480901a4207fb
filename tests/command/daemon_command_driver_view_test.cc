// The driver's view of a command that is not Python (docs/COMMANDS.md, "The driver's view"), on
// a real GPU: a daemon on --device cuda runs vramlab-test-cuda-hold, a C++ program that holds 1 GiB
// through the CUDA driver and never writes an event, as the unprivileged --command-user. The
// daemon reads the driver (NVML) while it runs: samples stream, and the report it makes at the end
// carries the job's peak as the driver listed it, which `show` names. Needs an NVIDIA GPU and
// driver (label needs-nvidia-gpu; scripts/test.sh and scripts/gpu-build.sh leave it out, by name,
// on a host without one).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;
using vramlab::v1::FinalReport;

constexpr int64_t kHeldBytes = 1LL << 30;
constexpr char kCommandUser[] = "nobody";

TEST(DaemonCommandDriverViewTest, AProgramThatIsNotPythonIsMeasuredFromTheDriver) {
  char tmpl[] = "/tmp/driver-view-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  // The command user executes the program from a directory it can read.
  chmod(dir.c_str(), 0755);
  const std::string program = dir + "/vramlab-test-cuda-hold";
  std::filesystem::copy_file(VRAMLAB_CUDA_HOLD_PATH, program);
  chmod(program.c_str(), 0755);

  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--device=cuda", "--gpus=0", "--allow-commands",
                       std::string("--command-user=") + kCommandUser, "--allowed-dir=" + dir}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_THAT((*daemon)->ReadLog(), ::testing::Not(HasSubstr("get no driver's view")))
      << (*daemon)->ReadLog();
  auto stub = (*daemon)->NewStub();

  vramlab::v1::ExperimentSpec spec;
  spec.set_name("cuda-hold");
  auto* command = spec.mutable_command();
  command->add_argv(program);
  command->add_argv(std::to_string(kHeldBytes));
  command->add_argv("3000");
  command->set_working_dir(dir);
  spec.mutable_memory()->set_sample_interval_ms(20);
  auto done = SubmitAndWaitForFinalState(*stub, spec, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  std::ifstream log_file((*daemon)->data_dir() + "/experiments/" + done->id() + "/worker.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)),
                        std::istreambuf_iterator<char>());
  ASSERT_EQ(done->state(), Experiment::SUCCEEDED) << done->state_reason() << "\n" << log;
  ASSERT_THAT(log, HasSubstr("holding " + std::to_string(kHeldBytes)));

  auto events = WatchAll(*stub, done->id(), 0, absl::Seconds(60));
  ASSERT_TRUE(events.ok()) << events.status();
  int samples = 0;
  int64_t peak_sample = 0;
  std::string notice;
  for (const auto& event : *events) {
    if (!event.has_worker_event()) continue;
    const auto& worker = event.worker_event();
    if (worker.has_sample()) {
      ++samples;
      EXPECT_GT(worker.sample().device_total_bytes(), kHeldBytes);
      EXPECT_GT(worker.sample().device_used_bytes(), 0);
      peak_sample = std::max(peak_sample, worker.sample().allocated_bytes());
    }
    if (worker.has_notice()) notice += worker.notice().message() + "\n";
  }
  // Three seconds of holding, a reading at most every 50 ms.
  EXPECT_GE(samples, 20) << notice;
  EXPECT_THAT(notice, HasSubstr("read the GPU driver"));

  ASSERT_TRUE(done->has_report()) << notice;
  const FinalReport& report = done->report();
  EXPECT_FALSE(report.device_name().empty());
  const int64_t peak = report.anatomy().peak_device_used_bytes();
  std::printf("measured by %s: peak %lld bytes (%.1f MiB over the 1 GiB held), %d samples\n%s",
              FinalReport::MeasuredBy_Name(report.measured_by()).c_str(),
              static_cast<long long>(peak), (peak - kHeldBytes) / 1048576.0, samples,
              notice.c_str());
  EXPECT_GE(peak, kHeldBytes);
  if (report.measured_by() == FinalReport::GPU_DRIVER_PROCESSES) {
    // The 1 GiB and the process's CUDA context, nothing of any other process.
    EXPECT_LT(peak, kHeldBytes + (1LL << 30));
    EXPECT_EQ(peak, peak_sample);
  } else {
    EXPECT_EQ(report.measured_by(), FinalReport::GPU_DRIVER_DEVICE) << notice;
  }

  ChildResult show = RunChild({.argv = {DaemonHarness::BinDir() + "/vramlab", "--addr",
                                        (*daemon)->address(), "show", done->id()}});
  EXPECT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_THAT(show.out, HasSubstr("the driver's view only: not a PyTorch program"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vramlab::testing
