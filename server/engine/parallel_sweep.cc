#include "server/engine/parallel_sweep.h"

#include <algorithm>

#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::server {

using vramlab::v1::FinalReport;

bool HasSweep(const vramlab::v1::ExperimentSpec& spec) {
  const vramlab::v1::SweepSpec& sweep = spec.sweep();
  return sweep.values_size() > 0 || sweep.mode() == vramlab::v1::SEARCH_MAX;
}

bool IsParallelSweep(const vramlab::v1::ExperimentSpec& spec) {
  return spec.parallel().world_size() >= 2 && HasSweep(spec);
}

int SweepWorldSize(const vramlab::v1::ExperimentSpec& spec) {
  return std::max(1, spec.parallel().world_size());
}

spec_rules::SweepOrder SweepOrderOf(const vramlab::v1::SweepSpec& sweep) {
  return spec_rules::SweepOrderOf(plain::FromProto(sweep));
}

FinalReport MergePointReports(const std::vector<FinalReport>& reports) {
  FinalReport merged;
  if (reports.empty()) return merged;
  // The worker's rule (worker/train/experiment_runner.cc): the first point of the largest value
  // that fit, else the last point.
  const FinalReport* chosen = nullptr;
  for (const FinalReport& report : reports) {
    for (const auto& point : report.sweep_points()) {
      *merged.add_sweep_points() = point;
      if (!point.oom() && (chosen == nullptr || point.value() > merged.largest_fitting_value())) {
        chosen = &report;
        merged.set_largest_fitting_value(point.value());
      }
    }
  }
  if (chosen == nullptr) chosen = &reports.back();
  *merged.mutable_anatomy() = chosen->anatomy();
  merged.set_attention_backend(chosen->attention_backend());
  merged.set_median_step_time_seconds(chosen->median_step_time_seconds());
  merged.set_tokens_per_second(chosen->tokens_per_second());
  merged.set_mfu(chosen->mfu());
  merged.set_final_loss(chosen->final_loss());
  merged.set_steady_steps(chosen->steady_steps());
  merged.set_warmup_steps(chosen->warmup_steps());
  merged.set_warmup_step_time_seconds(chosen->warmup_step_time_seconds());
  const FinalReport& latest = reports.back();
  merged.set_parameter_count(latest.parameter_count());
  merged.set_device_name(latest.device_name());
  merged.set_snapshot_written(latest.snapshot_written());
  merged.set_sampler_overhead_ratio(latest.sampler_overhead_ratio());
  return merged;
}

ParallelSweep::ParallelSweep(const vramlab::v1::SweepSpec& sweep, int world_size)
    : order_(SweepOrderOf(sweep)), world_size_(world_size), running_(world_size) {}

std::optional<spec_rules::SweepPoint> ParallelSweep::Next() const {
  const std::optional<int32_t> value = order_.Next();
  if (!value.has_value()) return std::nullopt;
  return spec_rules::SweepPoint{order_.next_index(), *value};
}

void ParallelSweep::OnReport(int rank, const FinalReport& report) {
  if (rank < 0 || rank >= world_size_) return;
  running_[rank] = report;
}

void ParallelSweep::EndPoint(bool out_of_memory, std::optional<int> deciding_rank) {
  EndedPoint ended;
  ended.point = *Next();
  ended.out_of_memory = out_of_memory;
  ended.deciding_rank = deciding_rank;
  ended.reports = std::move(running_);
  running_.assign(world_size_, std::nullopt);
  ended_.push_back(std::move(ended));
  order_.Record(out_of_memory);
}

std::optional<FinalReport> ParallelSweep::ExperimentReport() const {
  if (ended_.empty()) return std::nullopt;
  std::vector<FinalReport> reports;
  for (const EndedPoint& ended : ended_) {
    const int rank =
        ended.out_of_memory && ended.deciding_rank.has_value() ? *ended.deciding_rank : 0;
    const bool reported = rank >= 0 && rank < world_size_ && ended.reports[rank].has_value() &&
                          ended.reports[rank]->sweep_points_size() == 1;
    FinalReport report;
    if (reported) {
      report = *ended.reports[rank];
    } else {
      auto* point = report.add_sweep_points();
      point->set_sweep_index(ended.point.index);
      point->set_value(ended.point.value);
    }
    if (ended.out_of_memory) report.mutable_sweep_points(0)->set_oom(true);
    reports.push_back(std::move(report));
  }
  return MergePointReports(reports);
}

std::optional<FinalReport> ParallelSweep::RankReport(int rank) const {
  if (rank < 0 || rank >= world_size_) return std::nullopt;
  std::vector<FinalReport> reports;
  for (const EndedPoint& ended : ended_) {
    if (ended.reports[rank].has_value()) reports.push_back(*ended.reports[rank]);
  }
  if (reports.empty()) return std::nullopt;
  return MergePointReports(reports);
}

}  // namespace vramlab::server
