#include "client/timeline.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace vramlab::client {

using namespace vramlab::v1;  // NOLINT: many message types

namespace {

// The reading a worker event carries, if any.
const MemorySample* ReadingOf(const vramlab::v1::WorkerEvent& worker) {
  if (worker.has_sample()) return &worker.sample();
  if (worker.has_phase() && worker.phase().has_memory()) return &worker.phase().memory();
  if (worker.has_oom() && worker.oom().has_memory()) return &worker.oom().memory();
  return nullptr;
}

}  // namespace

std::vector<double> WorkerClockShifts(const std::vector<ExperimentEvent>& events) {
  std::vector<std::pair<int, int>> worker_of(events.size(), {-1, 0});  // (rank, worker)
  std::map<int, int> started;                                          // rank -> workers begun
  std::map<std::pair<int, int>, double> start;  // (rank, worker) -> start on the daemon's clock
  for (size_t i = 0; i < events.size(); ++i) {
    if (!events[i].has_worker_event()) continue;
    const auto& worker = events[i].worker_event();
    const int rank = worker.rank();
    if (worker.has_started()) ++started[rank];
    worker_of[i] = {rank, std::max(started[rank] - 1, 0)};
    const MemorySample* reading = ReadingOf(worker);
    if (reading == nullptr || !events[i].has_time()) continue;
    const double received = events[i].time().seconds() + events[i].time().nanos() * 1e-9;
    const double at = received - reading->time_seconds();
    auto [it, inserted] = start.try_emplace(worker_of[i], at);
    it->second = std::min(it->second, at);
  }
  std::vector<double> shifts(events.size(), 0.0);
  for (size_t i = 0; i < events.size(); ++i) {
    const auto [rank, index] = worker_of[i];
    if (index == 0) continue;
    const auto first = start.find({rank, 0}), self = start.find(worker_of[i]);
    if (first != start.end() && self != start.end()) shifts[i] = self->second - first->second;
  }
  return shifts;
}

Timeline BuildTimeline(const std::vector<ExperimentEvent>& events) {
  Timeline timeline;
  // Open phases keyed by (phase, step, micro_step, sweep_index): BEGIN and END pair up exactly.
  std::map<std::tuple<int, int, int, int>, double> open;
  const std::vector<double> shifts = WorkerClockShifts(events);
  // A reading on the timeline's clock.
  auto shifted = [&](const MemorySample& s, size_t i) {
    MemorySample copy = s;
    copy.set_time_seconds(s.time_seconds() + shifts[i]);
    return copy;
  };
  for (size_t i = 0; i < events.size(); ++i) {
    const ExperimentEvent& event = events[i];
    if (!event.has_worker_event()) continue;
    const WorkerEvent& worker = event.worker_event();
    if (worker.has_sample()) {
      timeline.samples.push_back(shifted(worker.sample(), i));
    } else if (worker.has_phase()) {
      const PhaseEvent& p = worker.phase();
      if (p.has_memory()) timeline.samples.push_back(shifted(p.memory(), i));
      const auto key =
          std::make_tuple(static_cast<int>(p.phase()), p.step(), p.micro_step(), p.sweep_index());
      const double t = p.memory().time_seconds() + shifts[i];
      if (p.edge() == BEGIN) {
        open[key] = t;
      } else if (p.edge() == END) {
        auto it = open.find(key);
        if (it != open.end()) {
          timeline.bands.push_back(
              {p.phase(), it->second, t, p.step(), p.micro_step(), p.sweep_index()});
          open.erase(it);
        }
      }
    } else if (worker.has_oom() && worker.oom().has_memory()) {
      timeline.samples.push_back(shifted(worker.oom().memory(), i));
    }
  }
  std::stable_sort(timeline.samples.begin(), timeline.samples.end(),
                   [](const MemorySample& a, const MemorySample& b) {
                     return a.time_seconds() < b.time_seconds();
                   });
  for (size_t i = 0; i < timeline.samples.size(); ++i) {
    const MemorySample& s = timeline.samples[i];
    timeline.end_seconds = std::max(timeline.end_seconds, s.time_seconds());
    timeline.max_reserved_bytes = std::max(timeline.max_reserved_bytes, s.reserved_bytes());
    if (timeline.peak_index < 0 ||
        s.allocated_bytes() > timeline.samples[timeline.peak_index].allocated_bytes()) {
      timeline.peak_index = static_cast<int>(i);
    }
  }
  // A phase cut short (OOM, cancellation) still shows, up to the last reading.
  for (const auto& [key, start] : open) {
    timeline.bands.push_back({static_cast<Phase>(std::get<0>(key)), start, timeline.end_seconds,
                              std::get<1>(key), std::get<2>(key), std::get<3>(key)});
  }
  std::sort(
      timeline.bands.begin(), timeline.bands.end(),
      [](const PhaseBand& a, const PhaseBand& b) { return a.start_seconds < b.start_seconds; });
  return timeline;
}

std::vector<MemorySample> Downsample(const std::vector<MemorySample>& samples, size_t buckets) {
  if (buckets == 0 || samples.size() <= 2 * buckets) return samples;
  std::vector<MemorySample> out;
  const double start = samples.front().time_seconds();
  const double span = std::max(samples.back().time_seconds() - start, 1e-9);
  size_t i = 0;
  for (size_t b = 0; b < buckets && i < samples.size(); ++b) {
    const double bucket_end = start + span * static_cast<double>(b + 1) / buckets;
    if (samples[i].time_seconds() > bucket_end && b + 1 < buckets) continue;  // empty bucket
    size_t low = i, high = i;
    int64_t max_reserved = samples[i].reserved_bytes();
    for (; i < samples.size() && (samples[i].time_seconds() <= bucket_end || b + 1 == buckets);
         ++i) {
      if (samples[i].allocated_bytes() < samples[low].allocated_bytes()) low = i;
      if (samples[i].allocated_bytes() > samples[high].allocated_bytes()) high = i;
      max_reserved = std::max(max_reserved, samples[i].reserved_bytes());
    }
    MemorySample first = samples[std::min(low, high)];
    MemorySample second = samples[std::max(low, high)];
    first.set_reserved_bytes(std::max(first.reserved_bytes(), max_reserved));
    second.set_reserved_bytes(std::max(second.reserved_bytes(), max_reserved));
    out.push_back(first);
    if (low != high) out.push_back(second);
  }
  return out;
}

}  // namespace vramlab::client
