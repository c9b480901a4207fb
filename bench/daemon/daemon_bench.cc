// Daemon benchmark (docs/BENCHMARKS.md):
//  1. Submit latency while the queue grows to 1,000 experiments and with 1,000 already queued
//     (one CPU slot held by a hanging experiment, so nothing drains).
//  2. 100 concurrent watchers of one running experiment: events delivered per second and the
//     daemon's CPU time over the same interval.
// Usage: vramlab-daemon-bench [--queued N] [--extra N] [--watchers N] [--steps N]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/support/daemon_harness.h"

namespace {

using vramlab::testing::DaemonHarness;
using vramlab::v1::Experiment;

// utime + stime of `pid`, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(content.substr(content.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

int Flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    int value = 0;
    if (argv[i] == name && absl::SimpleAtoi(argv[i + 1], &value)) return value;
  }
  return fallback;
}

int BenchSubmit(int queued, int extra) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--cpu-slots=1", "--enable-fault-injection",
                       absl::StrCat("--max-queued-per-user=", queued + extra),
                       absl::StrCat("--max-queued-total=", queued + extra),
                       "--shutdown-grace-period=0s", "--cancel-grace-period=1s"},
       .enable_metrics = true});
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  auto stub = (*daemon)->NewStub();
  vramlab::v1::ExperimentSpec blocker = vramlab::testing::TinySpec();
  blocker.set_fault(vramlab::v1::HANG);
  auto held = vramlab::testing::Submit(*stub, blocker);
  if (!held.ok() || !vramlab::testing::WaitForState(*stub, held->id(), Experiment::RUNNING).ok()) {
    std::fprintf(stderr, "blocker did not start\n");
    return 1;
  }
  std::vector<double> filling, deep;
  for (int i = 0; i < queued + extra; ++i) {
    absl::Time start = absl::Now();
    auto e = vramlab::testing::Submit(*stub, vramlab::testing::TinySpec());
    double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!e.ok()) {
      std::fprintf(stderr, "submit %d: %s\n", i, std::string(e.status().message()).c_str());
      return 1;
    }
    (i < queued ? filling : deep).push_back(ms);
  }
  std::printf("submit latency, queue growing 0 -> %d: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              queued, Percentile(filling, 0.5), Percentile(filling, 0.99),
              *std::max_element(filling.begin(), filling.end()));
  std::printf(
      "submit latency with %d+ queued (%d submits): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
      queued, extra, Percentile(deep, 0.5), Percentile(deep, 0.99),
      *std::max_element(deep.begin(), deep.end()));
  // GetExperiment of the last one computes its queue position among all of them.
  std::vector<double> gets;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext context;
    vramlab::v1::GetExperimentRequest request;
    request.set_id(absl::StrFormat("exp-%06d", queued + extra + 1));
    Experiment e;
    absl::Time start = absl::Now();
    stub->GetExperiment(&context, request, &e);
    gets.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  std::printf("GetExperiment with %d queued: p50 %.2f ms, p99 %.2f ms\n", queued + extra,
              Percentile(gets, 0.5), Percentile(gets, 0.99));
  (void)(*daemon)->Kill();
  return 0;
}

int BenchWatchers(int watchers, int steps) {
  auto daemon = DaemonHarness::Start({.extra_flags = {"--cpu-slots=1"}});
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  auto stub = (*daemon)->NewStub();
  vramlab::v1::ExperimentSpec spec = vramlab::testing::TinySpec(64, steps);
  spec.mutable_memory()->set_sample_interval_ms(1);
  auto running = vramlab::testing::Submit(*stub, spec);
  if (!running.ok() ||
      !vramlab::testing::WaitForState(*stub, running->id(), Experiment::RUNNING).ok()) {
    std::fprintf(stderr, "experiment did not start\n");
    return 1;
  }
  std::atomic<int64_t> delivered{0};
  std::atomic<int> complete{0};
  double cpu_before = CpuSeconds((*daemon)->pid());
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int i = 0; i < watchers; ++i) {
    threads.emplace_back([&] {
      auto events = vramlab::testing::WatchAll(*stub, running->id(), 0, absl::Minutes(10));
      if (events.ok()) {
        delivered += static_cast<int64_t>(events->size());
        if (!events->empty() && events->back().has_state_change() &&
            events->back().state_change().state() == Experiment::SUCCEEDED) {
          ++complete;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  double cpu = CpuSeconds((*daemon)->pid()) - cpu_before;
  auto all = vramlab::testing::WatchAll(*stub, running->id());
  size_t produced = all.ok() ? all->size() : 0;
  std::printf(
      "%d watchers of one running experiment (%zu events, %d steps): %d complete streams, "
      "%lld events delivered in %.2f s = %.0f events/s; daemon CPU %.2f s (%.0f%% of one "
      "core)\n",
      watchers, produced, steps, complete.load(), static_cast<long long>(delivered.load()), seconds,
      delivered.load() / seconds, cpu, 100.0 * cpu / seconds);
  return complete.load() == watchers ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int queued = Flag(argc, argv, "--queued", 1000);
  int extra = Flag(argc, argv, "--extra", 200);
  int watchers = Flag(argc, argv, "--watchers", 100);
  int steps = Flag(argc, argv, "--steps", 40);
  char host[256] = "";
  gethostname(host, sizeof(host));
  std::printf("machine: %s, %u cores\n", host, std::thread::hardware_concurrency());
  if (int rc = BenchSubmit(queued, extra); rc != 0) return rc;
  return BenchWatchers(watchers, steps);
}
