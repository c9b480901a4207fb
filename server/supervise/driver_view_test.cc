#include "server/supervise/driver_view.h"

#include <deque>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::FinalReport;
using vramlab::v1::WorkerEvent;
using Clock = DriverView::Clock;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kTotal = 80LL << 30;

// Hands out scripted readings, one per Read; the last one repeats.
class ScriptedReader : public GpuMemoryReader {
 public:
  absl::StatusOr<GpuMemoryReading> Read(const std::string& gpu_uuid) override {
    uuids.push_back(gpu_uuid);
    if (script.empty()) return absl::UnavailableError("nothing scripted");
    absl::StatusOr<GpuMemoryReading> next = script.front();
    if (script.size() > 1) script.pop_front();
    return next;
  }
  std::deque<absl::StatusOr<GpuMemoryReading>> script;
  std::vector<std::string> uuids;
};

GpuMemoryReading Reading(int64_t device_used, std::vector<GpuProcessMemory> processes) {
  GpuMemoryReading reading;
  reading.used_bytes = device_used;
  reading.total_bytes = kTotal;
  reading.processes = std::move(processes);
  return reading;
}

// The job is pids 100 and 101; 200 is another user's process.
bool JobProcess(pid_t pid) { return pid == 100 || pid == 101; }

class DriverViewTest : public ::testing::Test {
 protected:
  DriverView View(std::chrono::milliseconds interval = std::chrono::milliseconds(10)) {
    return DriverView(&reader_, "GPU-1234", "NVIDIA H200", interval, start_);
  }
  Clock::time_point At(int ms) const { return start_ + std::chrono::milliseconds(ms); }

  ScriptedReader reader_;
  const Clock::time_point start_ = Clock::now();
};

TEST_F(DriverViewTest, SamplesTheJobsProcessesAtMostEveryFiftyMilliseconds) {
  reader_.script = {
      Reading(3000 * kMiB, {{100, 600 * kMiB}, {200, 1000 * kMiB}}),
      Reading(5000 * kMiB, {{100, 1600 * kMiB}, {101, 400 * kMiB}, {200, 1000 * kMiB}}),
      Reading(4000 * kMiB, {{100, 1000 * kMiB}, {200, 1000 * kMiB}})};
  DriverView view = View();  // 10 ms asked: raised to kDriverViewMinInterval
  std::optional<WorkerEvent> first = view.Sample(At(0), JobProcess);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(view.Sample(At(10), JobProcess).has_value());
  EXPECT_FALSE(view.Sample(At(49), JobProcess).has_value());
  std::optional<WorkerEvent> second = view.Sample(At(50), JobProcess);
  ASSERT_TRUE(second.has_value());
  std::optional<WorkerEvent> third = view.Sample(At(130), JobProcess);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(reader_.uuids, std::vector<std::string>(3, "GPU-1234"));

  const vramlab::v1::MemorySample& s1 = first->sample();
  EXPECT_EQ(s1.allocated_bytes(), 600 * kMiB);  // the other user's 1000 MiB is not the job's
  EXPECT_EQ(s1.reserved_bytes(), 600 * kMiB);
  EXPECT_EQ(s1.device_used_bytes(), 3000 * kMiB);
  EXPECT_EQ(s1.device_total_bytes(), kTotal);
  EXPECT_DOUBLE_EQ(s1.time_seconds(), 0.0);
  const vramlab::v1::MemorySample& s2 = second->sample();
  EXPECT_EQ(s2.allocated_bytes(), 2000 * kMiB);  // both of the job's processes
  EXPECT_EQ(s2.peak_allocated_bytes(), 2000 * kMiB);
  EXPECT_DOUBLE_EQ(s2.time_seconds(), 0.05);
  const vramlab::v1::MemorySample& s3 = third->sample();
  EXPECT_EQ(s3.allocated_bytes(), 1000 * kMiB);
  EXPECT_EQ(s3.peak_allocated_bytes(), 2000 * kMiB);
  EXPECT_EQ(s3.peak_reserved_bytes(), 2000 * kMiB);

  std::vector<WorkerEvent> closing = view.Close(/*job_sent_report=*/false);
  ASSERT_EQ(closing.size(), 2u);
  ASSERT_TRUE(closing[0].has_notice());
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("read the GPU driver 3 times, every 50 ms"));
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("1.95 GiB"));
  ASSERT_TRUE(closing[1].has_report());
  const FinalReport& report = closing[1].report();
  EXPECT_EQ(report.measured_by(), FinalReport::GPU_DRIVER_PROCESSES);
  EXPECT_EQ(report.anatomy().peak_device_used_bytes(), 2000 * kMiB);
  EXPECT_EQ(report.device_name(), "NVIDIA H200");
  EXPECT_TRUE(view.Close(false).empty()) << "closes once";
  EXPECT_FALSE(view.Sample(At(500), JobProcess).has_value()) << "no reading after the close";
}

TEST_F(DriverViewTest, ALongerIntervalIsKeptAndALateReadingDoesNotBunchUp) {
  reader_.script = {Reading(100 * kMiB, {{100, 10 * kMiB}})};
  DriverView view = View(std::chrono::milliseconds(200));
  EXPECT_TRUE(view.Sample(At(0), JobProcess).has_value());
  EXPECT_FALSE(view.Sample(At(199), JobProcess).has_value());
  // The loop came late: one reading now, the next a whole interval later.
  EXPECT_TRUE(view.Sample(At(900), JobProcess).has_value());
  EXPECT_FALSE(view.Sample(At(950), JobProcess).has_value());
  EXPECT_TRUE(view.Sample(At(1100), JobProcess).has_value());
}

TEST_F(DriverViewTest, TheProbeSpeakingEndsTheReadingsAndTheDaemonsReport) {
  reader_.script = {Reading(3000 * kMiB, {{100, 600 * kMiB}})};
  DriverView view = View();
  EXPECT_TRUE(view.Sample(At(0), JobProcess).has_value());
  view.ProbeSpoke();
  EXPECT_FALSE(view.Sample(At(100), JobProcess).has_value());
  EXPECT_TRUE(view.Close(/*job_sent_report=*/false).empty());
}

TEST_F(DriverViewTest, AJobThatSentItsOwnReportGetsNone) {
  reader_.script = {Reading(3000 * kMiB, {{100, 600 * kMiB}})};
  DriverView view = View();
  EXPECT_TRUE(view.Sample(At(0), JobProcess).has_value());
  EXPECT_TRUE(view.Close(/*job_sent_report=*/true).empty());
}

TEST_F(DriverViewTest, NoneOfTheJobsPidsListedFallsBackToTheDevicesRise) {
  // The driver's pids are another namespace's: 4100 and 4200 are not the job's 100 and 101.
  reader_.script = {Reading(2000 * kMiB, {{4200, 1000 * kMiB}}),
                    Reading(3500 * kMiB, {{4100, 1500 * kMiB}, {4200, 1000 * kMiB}}),
                    Reading(2000 * kMiB, {{4200, 1000 * kMiB}})};
  DriverView view = View();
  for (int ms : {0, 50, 100}) {
    std::optional<WorkerEvent> sample = view.Sample(At(ms), JobProcess);
    ASSERT_TRUE(sample.has_value());
    EXPECT_EQ(sample->sample().allocated_bytes(), 0);
  }
  std::vector<WorkerEvent> closing = view.Close(false);
  ASSERT_EQ(closing.size(), 2u);
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("listed none of the job's processes"));
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("other processes on the GPU count too"));
  EXPECT_EQ(closing[1].report().measured_by(), FinalReport::GPU_DRIVER_DEVICE);
  EXPECT_EQ(closing[1].report().anatomy().peak_device_used_bytes(), 1500 * kMiB);
}

TEST_F(DriverViewTest, AJobThatNeverTouchedTheGpuReportsZeroFromItsProcesses) {
  reader_.script = {Reading(2000 * kMiB, {{4200, 1000 * kMiB}})};
  DriverView view = View();
  EXPECT_TRUE(view.Sample(At(0), JobProcess).has_value());
  EXPECT_TRUE(view.Sample(At(60), JobProcess).has_value());
  std::vector<WorkerEvent> closing = view.Close(false);
  ASSERT_EQ(closing.size(), 2u);
  EXPECT_EQ(closing[1].report().measured_by(), FinalReport::GPU_DRIVER_PROCESSES);
  EXPECT_EQ(closing[1].report().anatomy().peak_device_used_bytes(), 0);
}

TEST_F(DriverViewTest, AProcessWithoutAByteCountIsNamedInTheNotice) {
  reader_.script = {Reading(2000 * kMiB, {{100, -1}, {101, 300 * kMiB}})};
  DriverView view = View();
  ASSERT_TRUE(view.Sample(At(0), JobProcess).has_value());
  std::vector<WorkerEvent> closing = view.Close(false);
  ASSERT_EQ(closing.size(), 2u);
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("no byte count for some of them"));
  EXPECT_EQ(closing[1].report().anatomy().peak_device_used_bytes(), 300 * kMiB);
}

TEST_F(DriverViewTest, FailedReadingsYieldNoSamplesAndAWarningAtTheEnd) {
  reader_.script = {absl::UnavailableError("nvmlDeviceGetMemoryInfo failed: GPU is lost")};
  DriverView view = View();
  EXPECT_FALSE(view.Sample(At(0), JobProcess).has_value());
  EXPECT_FALSE(view.Sample(At(60), JobProcess).has_value());
  std::vector<WorkerEvent> closing = view.Close(false);
  ASSERT_EQ(closing.size(), 1u);
  EXPECT_EQ(closing[0].notice().level(), vramlab::v1::Notice::WARNING);
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("GPU is lost"));
}

TEST_F(DriverViewTest, AFailureBetweenReadingsIsNamedBesideTheReport) {
  reader_.script = {Reading(2000 * kMiB, {{100, 300 * kMiB}}),
                    absl::UnavailableError("nvmlDeviceGetComputeRunningProcesses failed: Timeout"),
                    Reading(2000 * kMiB, {{100, 500 * kMiB}})};
  DriverView view = View();
  EXPECT_TRUE(view.Sample(At(0), JobProcess).has_value());
  EXPECT_FALSE(view.Sample(At(50), JobProcess).has_value());
  EXPECT_TRUE(view.Sample(At(100), JobProcess).has_value());
  std::vector<WorkerEvent> closing = view.Close(false);
  ASSERT_EQ(closing.size(), 2u);
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("read the GPU driver 2 times"));
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("a reading failed: "));
  EXPECT_THAT(closing[0].notice().message(), HasSubstr("Timeout"));
  EXPECT_EQ(closing[1].report().anatomy().peak_device_used_bytes(), 500 * kMiB);
}

}  // namespace
}  // namespace vramlab::server
