// What a scrape of the exporter shows equals what WatchExperiment streamed for the same sample:
// the daemon feeds both from one worker event, metrics first, under one lock. So when a watcher
// has received sample k, a scrape taken afterwards shows sample k or a later one, never an older
// one and never a mixture of two.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <optional>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_text.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::MemorySample;

// The gauges one sample sets, as doubles (the text format's representation).
struct Reading {
  double allocated, reserved, active, peak_allocated, device_used, fragmentation;
};

Reading FromSample(const MemorySample& s) {
  return {static_cast<double>(s.allocated_bytes()),   static_cast<double>(s.reserved_bytes()),
          static_cast<double>(s.active_bytes()),      static_cast<double>(s.peak_allocated_bytes()),
          static_cast<double>(s.device_used_bytes()), s.fragmentation_ratio()};
}

bool SameReading(const Reading& a, const Reading& b) {
  // Byte counts are integers below 2^53 and print exactly; the ratio prints with 16 digits.
  return a.allocated == b.allocated && a.reserved == b.reserved && a.active == b.active &&
         a.peak_allocated == b.peak_allocated && a.device_used == b.device_used &&
         std::fabs(a.fragmentation - b.fragmentation) <= 1e-12;
}

std::optional<Reading> FromScrape(const std::string& text, int slot) {
  auto get = [&](const char* name) {
    return SeriesValue(text, absl::StrCat(name, "{gpu=\"", slot, "\"}"));
  };
  auto allocated = get("vramlab_gpu_allocated_bytes"), reserved = get("vramlab_gpu_reserved_bytes"),
       active = get("vramlab_gpu_active_bytes"), peak = get("vramlab_gpu_peak_allocated_bytes"),
       used = get("vramlab_gpu_device_used_bytes"), frag = get("vramlab_gpu_fragmentation_ratio");
  if (!allocated || !reserved || !active || !peak || !used || !frag) return std::nullopt;
  return Reading{*allocated, *reserved, *active, *peak, *used, *frag};
}

// Samples in the order the watch stream delivered them (periodic samples and phase-boundary
// readings: the daemon exports both).
class WatchedSamples {
 public:
  void Add(const MemorySample& s) {
    absl::MutexLock lock(&mu_);
    samples_.push_back(s);
  }
  size_t Count() const {
    absl::MutexLock lock(&mu_);
    return samples_.size();
  }
  std::vector<MemorySample> Copy() const {
    absl::MutexLock lock(&mu_);
    return samples_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<MemorySample> samples_ ABSL_GUARDED_BY(mu_);
};

TEST(ScrapeMatchesWatchTest, EveryScrapeIsTheLatestWatchedSampleOrNewer) {
  auto daemon = DaemonHarness::Start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  // More steps than the comparisons need; the run is cancelled once enough scrapes were compared.
  vramlab::v1::ExperimentSpec spec = TinySpec(/*seq_len=*/64, /*steps=*/5000);
  spec.mutable_memory()->set_sample_interval_ms(5);
  auto submitted = Submit(*stub, spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();

  WatchedSamples watched;
  std::atomic<bool> stream_ended{false};
  grpc::ClientContext watch_context;
  std::thread watcher([&] {
    vramlab::v1::WatchExperimentRequest request;
    request.set_id(submitted->id());
    auto reader = stub->WatchExperiment(&watch_context, request);
    vramlab::v1::ExperimentEvent event;
    while (reader->Read(&event)) {
      if (!event.has_worker_event()) continue;
      const auto& w = event.worker_event();
      if (w.has_sample()) watched.Add(w.sample());
      if (w.has_phase() && w.phase().has_memory()) watched.Add(w.phase().memory());
    }
    reader->Finish();
    stream_ended = true;
  });
  // However the test leaves (a failed ASSERT included), the watcher thread ends first.
  absl::Cleanup stop_watcher = [&] {
    watch_context.TryCancel();
    watcher.join();
  };

  auto running = WaitForState(*stub, submitted->id(), Experiment::RUNNING);
  ASSERT_TRUE(running.ok()) << running.status();
  const int slot = running->slot();
  int compared = 0, matched_latest = 0;
  constexpr int kScrapesToCompare = 20;
  while (!stream_ended && compared < kScrapesToCompare) {
    // Everything the watcher holds now was exported before it was streamed.
    const size_t seen_before = watched.Count();
    auto scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
    ASSERT_TRUE(scrape.ok()) << scrape.status();
    if (seen_before == 0 ||
        absl::StrContains(*scrape, "vramlab_experiment_running_info{") == false) {
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    const std::optional<Reading> reading = FromScrape(*scrape, slot);
    ASSERT_TRUE(reading.has_value()) << *scrape;
    // The scrape may show a sample the stream has not delivered yet: look again as it arrives.
    std::vector<MemorySample> samples;
    std::optional<size_t> match;
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (!match.has_value() && absl::Now() < deadline) {
      samples = watched.Copy();
      for (size_t i = seen_before - 1; i < samples.size(); ++i) {
        if (SameReading(FromSample(samples[i]), *reading)) {
          match = i;
          break;
        }
      }
      if (!match.has_value()) absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_TRUE(match.has_value())
        << "scrape shows allocated=" << reading->allocated << " reserved=" << reading->reserved
        << ", not among the " << samples.size() - seen_before + 1
        << " samples streamed from the latest one seen before the scrape (allocated="
        << samples[seen_before - 1].allocated_bytes() << ")";
    ++compared;
    if (*match == seen_before - 1) ++matched_latest;
  }
  EXPECT_EQ(compared, kScrapesToCompare) << "the run ended before enough scrapes were compared";
  RecordProperty("scrapes_compared", compared);
  RecordProperty("scrapes_equal_to_latest_watched", matched_latest);
  std::printf("%d scrapes compared, %d equal to the latest watched sample, the others newer\n",
              compared, matched_latest);

  grpc::ClientContext cancel_context;
  vramlab::v1::CancelExperimentRequest cancel;
  cancel.set_id(submitted->id());
  Experiment cancelled;
  const grpc::Status status = stub->CancelExperiment(&cancel_context, cancel, &cancelled);
  EXPECT_TRUE(status.ok()) << status.error_message();
  auto done = WaitForFinalState(*stub, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::CANCELLED) << done->state_reason();
}

}  // namespace
}  // namespace vramlab::testing
