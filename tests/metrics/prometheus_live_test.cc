// A real Prometheus (Debian's 2.42) scrapes a real vramlabd every second while the real worker
// trains the tiny preset on the CPU; the series are read back through Prometheus's HTTP API.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentSpec;

constexpr int64_t kMemoryLimitBytes = int64_t{2} << 30;
// More steps than any check needs: each test cancels its run once it has looked, so no check
// depends on how fast the machine trains.
constexpr int kSteps = 5000;

// A run that outlasts the checks: several one-second scrapes and the dashboard's rate windows.
ExperimentSpec LongTinySpec(const std::string& name) {
  ExperimentSpec spec = TinySpec(/*seq_len=*/64, /*steps=*/kSteps);
  spec.set_name(name);
  spec.mutable_memory()->set_device_memory_limit_bytes(kMemoryLimitBytes);
  return spec;
}

class PrometheusLiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto daemon = DaemonHarness::Start();
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    ASSERT_GT(daemon_->metrics_port(), 0) << daemon_->ReadLog();
    auto prometheus = PrometheusProcess::Start(Instance());
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = prometheus->release();
    // The first scrape has happened: every test starts with the daemon's series in Prometheus.
    auto up = prometheus_->WaitForValue("up{job=\"vramlabd\"}", [](double v) { return v == 1; });
    ASSERT_TRUE(up.ok()) << up.status() << prometheus_->ReadLog();
  }
  static void TearDownTestSuite() {
    delete prometheus_;
    prometheus_ = nullptr;
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    ASSERT_NE(prometheus_, nullptr);
    stub_ = daemon_->NewStub();
  }

  // The `instance` label Prometheus gives the daemon's series.
  static std::string Instance() { return absl::StrCat("127.0.0.1:", daemon_->metrics_port()); }
  std::string Series(const std::string& name, const std::string& gpu) const {
    return absl::StrCat(name, "{instance=\"", Instance(), "\",gpu=\"", gpu, "\"}");
  }

  // Submits `spec` and waits until Prometheus has scraped it running (its _info series).
  Experiment StartAndWaitForInfo(const ExperimentSpec& spec) {
    auto submitted = Submit(*stub_, spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    auto running = WaitForState(*stub_, submitted->id(), Experiment::RUNNING);
    EXPECT_TRUE(running.ok()) << running.status() << daemon_->ReadLog();
    if (!running.ok()) return {};
    auto info = prometheus_->WaitForValue(
        absl::StrCat("vramlab_experiment_running_info{experiment=\"", running->id(), "\"}"),
        [](double v) { return v == 1; });
    EXPECT_TRUE(info.ok()) << info.status();
    return *running;
  }

  // Cancels a running experiment and waits for its final state.
  void CancelAndWait(const std::string& id) {
    grpc::ClientContext context;
    vramlab::v1::CancelExperimentRequest request;
    request.set_id(id);
    Experiment cancelled;
    const grpc::Status status = stub_->CancelExperiment(&context, request, &cancelled);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto done = WaitForFinalState(*stub_, id);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
  }

  // Steps recorded on every slot so far (the histogram is cumulative across runs).
  double StepsSoFar() {
    return ValueOrNan("sum(vramlab_step_duration_seconds_count) or vector(0)");
  }

  double ValueOrNan(const std::string& expr) {
    auto v = prometheus_->ScalarQuery(expr);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() && v->has_value() ? **v : NAN;
  }

  static inline DaemonHarness* daemon_ = nullptr;
  static inline PrometheusProcess* prometheus_ = nullptr;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

TEST_F(PrometheusLiveTest, SeriesArePlausibleWhileRunningAndInfoEndsWithTheRun) {
  const double cancelled_before = ValueOrNan("vramlab_experiments_total{outcome=\"cancelled\"}");
  ASSERT_FALSE(std::isnan(cancelled_before));
  const double steps_before = StepsSoFar();
  Experiment e = StartAndWaitForInfo(LongTinySpec("live series"));
  ASSERT_FALSE(e.id().empty());
  const std::string gpu = std::to_string(e.slot());

  EXPECT_EQ(ValueOrNan(absl::StrCat("vramlab_experiment_running_info{instance=\"", Instance(),
                                    "\",gpu=\"", gpu, "\",experiment=\"", e.id(), "\",owner=\"",
                                    e.owner(), "\",name=\"live series\"}")),
            1);
  // The model is built and training: allocated grows above zero, bounded by the limit.
  auto allocated = prometheus_->WaitForValue(Series("vramlab_gpu_allocated_bytes", gpu),
                                             [](double v) { return v > 0; });
  ASSERT_TRUE(allocated.ok()) << allocated.status();
  EXPECT_LT(*allocated, kMemoryLimitBytes);
  // Relations that hold within one sample (one scrape carries one sample).
  EXPECT_GE(ValueOrNan(absl::StrCat(Series("vramlab_gpu_reserved_bytes", gpu), " - ",
                                    Series("vramlab_gpu_allocated_bytes", gpu))),
            0);
  EXPECT_GE(ValueOrNan(absl::StrCat(Series("vramlab_gpu_peak_allocated_bytes", gpu), " - ",
                                    Series("vramlab_gpu_allocated_bytes", gpu))),
            0);
  EXPECT_GE(ValueOrNan(Series("vramlab_gpu_active_bytes", gpu)), 0);
  const double fragmentation = ValueOrNan(Series("vramlab_gpu_fragmentation_ratio", gpu));
  EXPECT_GE(fragmentation, 0);
  EXPECT_LE(fragmentation, 1);
  EXPECT_EQ(ValueOrNan(Series("vramlab_gpu_memory_limit_bytes", gpu)), kMemoryLimitBytes);
  EXPECT_GE(ValueOrNan(Series("vramlab_gpu_device_total_bytes", gpu)), 0);
  EXPECT_GE(ValueOrNan(Series("vramlab_gpu_device_used_bytes", gpu)), 0);
  // Steps complete: throughput and the step histogram move.
  auto tokens = prometheus_->WaitForValue(Series("vramlab_tokens_per_second", gpu),
                                          [](double v) { return v > 0; });
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  auto steps = prometheus_->WaitForValue(Series("vramlab_step_duration_seconds_count", gpu),
                                         [&](double v) { return v >= steps_before + 1; });
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_GT(ValueOrNan(Series("vramlab_step_duration_seconds_sum", gpu)), 0);
  // Daemon-wide series.
  for (const char* priority : {"low", "normal", "high"}) {
    EXPECT_GE(ValueOrNan(absl::StrCat("vramlab_queue_depth{priority=\"", priority, "\"}")), 0);
  }
  EXPECT_EQ(ValueOrNan("vramlab_build_info"), 1);
  EXPECT_GE(ValueOrNan("vramlab_watchers"), 0);
  EXPECT_GE(ValueOrNan("vramlab_worker_abnormal_exits_total"), 0);

  CancelAndWait(e.id());
  // The next scrape no longer has the series; Prometheus marks it stale at once.
  auto gone = prometheus_->WaitForValue(
      absl::StrCat("absent(vramlab_experiment_running_info{experiment=\"", e.id(), "\"})"),
      [](double v) { return v == 1; }, absl::Seconds(15));
  EXPECT_TRUE(gone.ok()) << gone.status();
  auto idle = prometheus_->WaitForValue(
      Series("vramlab_gpu_allocated_bytes", gpu), [](double v) { return v == 0; },
      absl::Seconds(15));
  EXPECT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(ValueOrNan("vramlab_experiments_total{outcome=\"cancelled\"}"), cancelled_before + 1);

  // A run that ends on its own is counted as succeeded.
  const double succeeded_before = ValueOrNan("vramlab_experiments_total{outcome=\"succeeded\"}");
  auto quick = Submit(*stub_, TinySpec(/*seq_len=*/32, /*steps=*/1));
  ASSERT_TRUE(quick.ok()) << quick.status();
  auto quick_done = WaitForFinalState(*stub_, quick->id());
  ASSERT_TRUE(quick_done.ok()) << quick_done.status();
  ASSERT_EQ(quick_done->state(), Experiment::SUCCEEDED) << quick_done->state_reason();
  auto counted = prometheus_->WaitForValue(
      "vramlab_experiments_total{outcome=\"succeeded\"}",
      [&](double v) { return v == succeeded_before + 1; }, absl::Seconds(15));
  EXPECT_TRUE(counted.ok()) << counted.status();
}

// Every dashboard expression: dashboard_live_test.cc.

// promtool's linter accepts a real scrape, which carries every family the exporter documents.
TEST_F(PrometheusLiveTest, RealScrapePassesPromtoolCheckMetrics) {
  auto scrape = HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  const CommandResult check = RunCommand({"promtool", "check", "metrics"}, *scrape);
  EXPECT_EQ(check.exit_code, 0) << check.output << "\n" << *scrape;
  for (const char* family :
       {"vramlab_gpu_allocated_bytes gauge", "vramlab_gpu_reserved_bytes gauge",
        "vramlab_gpu_active_bytes gauge", "vramlab_gpu_peak_allocated_bytes gauge",
        "vramlab_gpu_fragmentation_ratio gauge", "vramlab_gpu_free_block_fragmentation_ratio gauge",
        "vramlab_gpu_device_used_bytes gauge", "vramlab_gpu_device_total_bytes gauge",
        "vramlab_gpu_memory_limit_bytes gauge", "vramlab_experiment_running_info gauge",
        "vramlab_queue_depth gauge", "vramlab_experiments_total counter",
        "vramlab_step_duration_seconds histogram", "vramlab_tokens_per_second gauge",
        "vramlab_worker_abnormal_exits_total counter", "vramlab_watchers gauge",
        "vramlab_build_info gauge"}) {
    EXPECT_NE(scrape->find(absl::StrCat("# TYPE ", family, "\n")), std::string::npos) << family;
  }
}

}  // namespace
}  // namespace vramlab::testing
