// Unit tests of the exporter: feed it the events the daemon feeds it, serialize, and read the
// text format back line by line.
#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_text.h"

namespace vramlab::server {
namespace {

using vramlab::testing::SeriesValue;
using vramlab::v1::Experiment;
using vramlab::v1::MemorySample;

MemorySample Sample(int64_t allocated, int64_t reserved) {
  MemorySample s;
  s.set_time_seconds(1.5);
  s.set_allocated_bytes(allocated);
  s.set_reserved_bytes(reserved);
  s.set_active_bytes(allocated + 512);
  s.set_peak_allocated_bytes(allocated * 2);
  s.set_device_used_bytes(reserved + (620 << 20));
  s.set_device_total_bytes(int64_t{80} << 30);
  s.set_fragmentation_ratio(1.0 - static_cast<double>(allocated) / reserved);
  return s;
}

Experiment RunningExperiment(const std::string& id, const std::string& name) {
  Experiment e;
  e.set_id(id);
  e.set_owner("alice");
  e.mutable_spec()->set_name(name);
  e.mutable_spec()->mutable_memory()->set_device_memory_limit_bytes(int64_t{24} << 30);
  e.set_state(Experiment::RUNNING);
  return e;
}

TEST(MetricsTest, FreshExporterHasDaemonSeriesAtZero) {
  auto metrics = Metrics::CreateUnexposed();
  const std::string text = metrics->Serialize();
  EXPECT_EQ(metrics->port(), 0);
  EXPECT_EQ(
      SeriesValue(text, absl::StrCat("vramlab_build_info{version=\"", VRAMLAB_VERSION, "\"}")), 1);
  for (const char* priority : {"low", "normal", "high"}) {
    EXPECT_EQ(SeriesValue(text, absl::StrCat("vramlab_queue_depth{priority=\"", priority, "\"}")),
              0)
        << priority;
  }
  for (const char* outcome : {"succeeded", "oom", "failed", "cancelled", "interrupted"}) {
    EXPECT_EQ(
        SeriesValue(text, absl::StrCat("vramlab_experiments_total{outcome=\"", outcome, "\"}")), 0)
        << outcome;
  }
  EXPECT_EQ(SeriesValue(text, "vramlab_worker_abnormal_exits_total"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_watchers"), 0);
  EXPECT_TRUE(absl::StrContains(text, "# TYPE vramlab_experiments_total counter"));
  EXPECT_TRUE(absl::StrContains(text, "# TYPE vramlab_step_duration_seconds histogram"));
}

TEST(MetricsTest, SampleOfRunningExperimentIsExportedPerSlot) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->SetSlot(0, int64_t{80} << 30);
  metrics->SetSlot(1, int64_t{80} << 30);
  metrics->OnExperimentStarted(1, RunningExperiment("exp-000007", "seq 4096"));
  MemorySample sample = Sample(3000, 4000);
  sample.set_has_free_block_fragmentation(true);
  sample.set_free_block_fragmentation_ratio(0.375);
  metrics->OnSample(1, sample);

  const std::string text = metrics->Serialize();
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"1\"}"), 3000);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_reserved_bytes{gpu=\"1\"}"), 4000);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_active_bytes{gpu=\"1\"}"), 3512);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_peak_allocated_bytes{gpu=\"1\"}"), 6000);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_fragmentation_ratio{gpu=\"1\"}"), 0.25);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_free_block_fragmentation_ratio{gpu=\"1\"}"), 0.375);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_device_used_bytes{gpu=\"1\"}"), 4000 + (620 << 20));
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_device_total_bytes{gpu=\"1\"}"),
            double(int64_t{80} << 30));
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_memory_limit_bytes{gpu=\"1\"}"),
            double(int64_t{24} << 30));
  EXPECT_EQ(SeriesValue(text,
                        "vramlab_experiment_running_info{gpu=\"1\",experiment=\"exp-000007\","
                        "owner=\"alice\",name=\"seq 4096\"}"),
            1);
  // The idle slot: nothing allocated, no driver reading yet, the whole device as its limit.
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"0\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_device_used_bytes{gpu=\"0\"}"), std::nullopt);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_memory_limit_bytes{gpu=\"0\"}"),
            double(int64_t{80} << 30));
  EXPECT_FALSE(absl::StrContains(text, "vramlab_experiment_running_info{gpu=\"0\""));
}

// A GPU's series carry dcgm-exporter's labels for the same GPU (gpu, UUID, modelName, Hostname),
// so that `on (UUID)` joins them with DCGM_FI_* series; a slot without a UUID keeps gpu alone.
TEST(MetricsTest, GpuSeriesCarryDcgmExporterLabels) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->SetSlot(0, int64_t{80} << 30);
  metrics->SetSlot(1, int64_t{80} << 30);
  metrics->SetSlotIdentity(1, "GPU-9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9", "NVIDIA H200");
  metrics->OnExperimentStarted(1, RunningExperiment("exp-000007", "seq 4096"));
  metrics->OnSample(1, Sample(3000, 4000));
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string text = metrics->Serialize();
  const std::string dcgm = absl::StrCat(
      "{gpu=\"1\",UUID=\"GPU-9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9\",modelName=\"NVIDIA "
      "H200\",Hostname=\"",
      host, "\"}");
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes" + dcgm), 3000) << text;
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_reserved_bytes" + dcgm), 4000);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_device_total_bytes" + dcgm), double(int64_t{80} << 30));
  EXPECT_EQ(SeriesValue(text, "vramlab_tokens_per_second" + dcgm), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"0\"}"), 0);
}

TEST(MetricsTest, FreeBlockFragmentationSurvivesSamplesWithoutSnapshot) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->OnExperimentStarted(0, RunningExperiment("exp-1", "a"));
  EXPECT_EQ(
      SeriesValue(metrics->Serialize(), "vramlab_gpu_free_block_fragmentation_ratio{gpu=\"0\"}"),
      std::nullopt);
  MemorySample boundary = Sample(10, 20);
  boundary.set_has_free_block_fragmentation(true);
  boundary.set_free_block_fragmentation_ratio(0.5);
  metrics->OnSample(0, boundary);
  metrics->OnSample(0, Sample(15, 20));  // periodic sample: no snapshot-based value
  const std::string text = metrics->Serialize();
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_free_block_fragmentation_ratio{gpu=\"0\"}"), 0.5);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"0\"}"), 15);
}

TEST(MetricsTest, FinishedExperimentLeavesNoInfoSeriesAndCountsOutcome) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->SetSlot(0, 1000000);
  Experiment e = RunningExperiment("exp-000001", "short");
  metrics->OnExperimentStarted(0, e);
  metrics->OnSample(0, Sample(100, 200));
  vramlab::v1::StepResult step;
  step.set_step_time_seconds(0.2);
  step.set_tokens_per_second(1234.5);
  metrics->OnStepResult(0, step);
  EXPECT_EQ(SeriesValue(metrics->Serialize(), "vramlab_tokens_per_second{gpu=\"0\"}"), 1234.5);

  e.set_state(Experiment::OOM);
  metrics->OnExperimentFinished(0, e);
  const std::string text = metrics->Serialize();
  EXPECT_FALSE(absl::StrContains(text, "vramlab_experiment_running_info{"));
  EXPECT_EQ(SeriesValue(text, "vramlab_experiments_total{outcome=\"oom\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "vramlab_experiments_total{outcome=\"succeeded\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"0\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_reserved_bytes{gpu=\"0\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_device_used_bytes{gpu=\"0\"}"), std::nullopt);
  EXPECT_EQ(SeriesValue(text, "vramlab_tokens_per_second{gpu=\"0\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_memory_limit_bytes{gpu=\"0\"}"), 1000000);
  // The step history outlives the run: the histogram is cumulative.
  EXPECT_EQ(SeriesValue(text, "vramlab_step_duration_seconds_count{gpu=\"0\"}"), 1);
}

TEST(MetricsTest, AParallelRunIsNamedOnEachOfItsGpusAndCountedOnce) {
  auto metrics = Metrics::CreateUnexposed();
  for (int gpu : {0, 1, 2}) metrics->SetSlot(gpu, 1000000);
  Experiment e = RunningExperiment("exp-000002", "two ranks");
  metrics->OnExperimentStarted(0, e);
  metrics->OnExperimentStarted(2, e);
  metrics->OnSample(2, Sample(300, 400));
  std::string text = metrics->Serialize();
  EXPECT_TRUE(absl::StrContains(
      text, "vramlab_experiment_running_info{gpu=\"0\",experiment=\"exp-000002\""))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "vramlab_experiment_running_info{gpu=\"2\",experiment=\"exp-000002\""));
  EXPECT_FALSE(absl::StrContains(text, "vramlab_experiment_running_info{gpu=\"1\""));
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"2\"}"), 300);

  e.set_state(Experiment::SUCCEEDED);
  metrics->OnExperimentFinishedOnSlots({0, 2}, e);
  text = metrics->Serialize();
  EXPECT_FALSE(absl::StrContains(text, "vramlab_experiment_running_info{"));
  EXPECT_EQ(SeriesValue(text, "vramlab_experiments_total{outcome=\"succeeded\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"2\"}"), 0);
}

TEST(MetricsTest, QueuedCancellationDoesNotEndTheRunningExperiment) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->OnExperimentStarted(0, RunningExperiment("exp-running", "r"));
  Experiment queued;
  queued.set_id("exp-queued");
  queued.set_state(Experiment::CANCELLED);
  metrics->OnExperimentFinished(0, queued);
  const std::string text = metrics->Serialize();
  EXPECT_TRUE(absl::StrContains(text, "experiment=\"exp-running\""));
  EXPECT_EQ(SeriesValue(text, "vramlab_experiments_total{outcome=\"cancelled\"}"), 1);
  // A queued experiment has no slot: -1 counts it and creates no slot.
  queued.set_id("exp-queued-2");
  metrics->OnExperimentFinished(-1, queued);
  const std::string after = metrics->Serialize();
  EXPECT_EQ(SeriesValue(after, "vramlab_experiments_total{outcome=\"cancelled\"}"), 2);
  EXPECT_FALSE(absl::StrContains(after, "gpu=\"-1\""));
}

TEST(MetricsTest, StepDurationHistogramBucketsAreCumulative) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->SetSlot(0, 0);
  for (double seconds : {0.003, 0.04, 0.04, 0.7, 400.0}) {
    vramlab::v1::StepResult step;
    step.set_step_time_seconds(seconds);
    metrics->OnStepResult(0, step);
  }
  const std::string text = metrics->Serialize();
  auto bucket = [&](const std::string& le) {
    return SeriesValue(
        text, absl::StrCat("vramlab_step_duration_seconds_bucket{gpu=\"0\",le=\"", le, "\"}"));
  };
  EXPECT_EQ(bucket("0.005"), 1);
  EXPECT_EQ(bucket("0.05"), 3);
  EXPECT_EQ(bucket("1"), 4);
  EXPECT_EQ(bucket("300"), 4);
  EXPECT_EQ(bucket("+Inf"), 5);
  EXPECT_EQ(SeriesValue(text, "vramlab_step_duration_seconds_count{gpu=\"0\"}"), 5);
  EXPECT_NEAR(*SeriesValue(text, "vramlab_step_duration_seconds_sum{gpu=\"0\"}"), 400.783, 1e-9);
}

TEST(MetricsTest, DaemonGaugesAndCounters) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->SetQueueDepth(vramlab::v1::PRIORITY_HIGH, 3);
  metrics->SetQueueDepth(vramlab::v1::PRIORITY_UNSPECIFIED, 5);
  metrics->SetWatchers(2);
  metrics->OnWorkerAbnormalExit();
  metrics->OnWorkerAbnormalExit();
  const std::string text = metrics->Serialize();
  EXPECT_EQ(SeriesValue(text, "vramlab_queue_depth{priority=\"high\"}"), 3);
  EXPECT_EQ(SeriesValue(text, "vramlab_queue_depth{priority=\"normal\"}"), 5);
  EXPECT_EQ(SeriesValue(text, "vramlab_queue_depth{priority=\"low\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "vramlab_watchers"), 2);
  EXPECT_EQ(SeriesValue(text, "vramlab_worker_abnormal_exits_total"), 2);
}

TEST(MetricsTest, FreeFormNameIsEscapedAndBounded) {
  auto metrics = Metrics::CreateUnexposed();
  std::string name = "say \"hi\"\\\n";
  for (int i = 0; i < 100; ++i) name += "\xC3\xA9";  // 200 bytes of 'é'
  metrics->OnExperimentStarted(0, RunningExperiment("exp-2", name));
  const std::string text = metrics->Serialize();
  const size_t at = text.find("name=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string rest = text.substr(at + 6);
  EXPECT_TRUE(absl::StartsWith(rest, "say \\\"hi\\\"\\\\\\n\xC3\xA9")) << rest.substr(0, 40);
  // 10 bytes of prefix, then whole 2-byte characters up to the 128-byte cap: 59 of them.
  const size_t end = rest.find("\"}");
  ASSERT_NE(end, std::string::npos);
  const std::string value = rest.substr(0, end);
  EXPECT_EQ(value.size(), 4 + 2 + 2 + 2 + 2 + 2 + 59 * 2) << value;  // escapes are two bytes
  EXPECT_TRUE(absl::EndsWith(value, "\xC3\xA9"));
}

// Writers update allocated, reserved and active together; a concurrent scrape must never show
// them from different samples.
TEST(MetricsTest, ScrapeIsOneConsistentSample) {
  auto metrics = Metrics::CreateUnexposed();
  metrics->OnExperimentStarted(0, RunningExperiment("exp-3", "c"));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int64_t i = 1; !stop.load(); ++i) {
      MemorySample s;
      s.set_allocated_bytes(i);
      s.set_reserved_bytes(i);
      s.set_active_bytes(i);
      metrics->OnSample(0, s);
    }
  });
  int distinct = 0;
  double previous = -1;
  // Scrape until the writer has visibly moved between scrapes many times (a loaded machine may
  // schedule it rarely), or give up after 20 s.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int scrape = 0; (scrape < 200 || distinct < 20) && absl::Now() < deadline; ++scrape) {
    const std::string text = metrics->Serialize();
    const auto allocated = SeriesValue(text, "vramlab_gpu_allocated_bytes{gpu=\"0\"}");
    ASSERT_TRUE(allocated.has_value());
    ASSERT_EQ(allocated, SeriesValue(text, "vramlab_gpu_reserved_bytes{gpu=\"0\"}"));
    ASSERT_EQ(allocated, SeriesValue(text, "vramlab_gpu_active_bytes{gpu=\"0\"}"));
    if (*allocated != previous) ++distinct;
    previous = *allocated;
  }
  stop = true;
  writer.join();
  EXPECT_GE(distinct, 20);  // the scrapes really raced the writer
}

// Sends "<request_line> HTTP/1.0" over loopback; returns the whole response.
std::string HttpResponse(int port, const std::string& request_line) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  const std::string request = absl::StrCat(request_line, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[8192];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

// The body of GET `path`.
std::string HttpGet(int port, const std::string& path) {
  const std::string response = HttpResponse(port, "GET " + path);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The lines of `text` about vramlab_* families (samples, HELP and TYPE).
std::vector<std::string> VramlabLines(const std::string& text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "vramlab_")) lines.emplace_back(line);
  }
  return lines;
}

TEST(MetricsTest, ExposerServesTheSameSeriesOnAFreePort) {
  auto metrics = Metrics::Start("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_GT((*metrics)->port(), 0);
  (*metrics)->SetSlot(0, 4096);
  (*metrics)->OnExperimentStarted(0, RunningExperiment("exp-9", "http"));
  (*metrics)->OnSample(0, Sample(1024, 2048));
  const std::string body = HttpGet((*metrics)->port(), "/metrics");
  const std::string serialized = (*metrics)->Serialize();
  // The same vramlab_* series; the process_* values move between the two reads.
  EXPECT_EQ(VramlabLines(body), VramlabLines(serialized)) << body;
  EXPECT_FALSE(VramlabLines(body).empty());
  EXPECT_EQ(SeriesValue(body, "vramlab_gpu_reserved_bytes{gpu=\"0\"}"), 2048);
  EXPECT_TRUE(absl::StrContains(body, "\nprocess_resident_memory_bytes ")) << body;
  // No exporter-internal families beside ours and the standard process_* ones.
  EXPECT_FALSE(absl::StrContains(body, "exposer_")) << body;
}

TEST(MetricsTest, OnlyGetMetricsIsServed) {
  auto metrics = Metrics::Start("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(absl::StrContains(HttpResponse((*metrics)->port(), "GET /other"), " 404 "));
  EXPECT_TRUE(absl::StrContains(HttpResponse((*metrics)->port(), "POST /metrics"), " 405 "));
  EXPECT_TRUE(absl::StrContains(HttpResponse((*metrics)->port(), "GET /metrics"), " 200 "));
}

TEST(MetricsTest, BadServerOptionsAreRefused) {
  MetricsHttpOptions options;
  options.listen_address = "127.0.0.1:0";
  options.max_connections = 0;
  auto no_connections = Metrics::Start(options);
  ASSERT_FALSE(no_connections.ok());
  EXPECT_TRUE(absl::StrContains(no_connections.status().message(), "--metrics-max-connections"));
  options.max_connections = 4;
  options.max_connections_per_address = 5;
  auto over_total = Metrics::Start(options);
  ASSERT_FALSE(over_total.ok());
  EXPECT_TRUE(
      absl::StrContains(over_total.status().message(), "--metrics-max-connections-per-address"));
  options.max_connections_per_address = 4;
  options.request_timeout = absl::ZeroDuration();
  auto no_timeout = Metrics::Start(options);
  ASSERT_FALSE(no_timeout.ok());
  EXPECT_TRUE(absl::StrContains(no_timeout.status().message(), "--metrics-request-timeout"));
}

TEST(MetricsTest, BusyPortIsAnErrorNotACrash) {
  auto first = Metrics::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Metrics::Start(absl::StrCat("127.0.0.1:", (*first)->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "cannot serve metrics"))
      << second.status();
}

}  // namespace
}  // namespace vramlab::server
