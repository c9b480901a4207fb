#include "worker/train/experiment_runner.h"

#include <optional>

namespace vramlab::worker {
namespace {

void FillFromPoint(const PointOutcome& point, FinalReport& report) {
  report.anatomy = point.anatomy;
  report.attention_backend = point.attention_backend;
  report.median_step_time_seconds = point.median_step_time_seconds;
  report.tokens_per_second = point.tokens_per_second;
  report.mfu = point.mfu;
  report.final_loss = point.final_loss;
}

class SweepRunner {
 public:
  SweepRunner(const ExperimentSpec& spec, const Qwen2Config& config, const WorkerContext& context)
      : spec_(spec), config_(config), context_(context) {}

  ExperimentResult Run() {
    ExperimentResult result;
    if (spec_.sweep.mode == SweepMode::kSearchMax) {
      Bisect();
    } else {
      for (int32_t value : spec_.sweep.values) {
        if (RunPoint(value).oom) {
          result.oom = true;  // the torture test's answer: stop at the first OOM
          break;
        }
      }
    }
    result.has_report = true;
    result.report.sweep_points = points_;
    if (best_) {
      result.report.largest_fitting_value = best_value_;
      FillFromPoint(*best_, result.report);
    } else if (last_) {
      FillFromPoint(*last_, result.report);  // nothing fit: the anatomy of what ran before the OOM
    }
    return result;
  }

 private:
  // Invariant: every candidate below index `fits` fits and every one from `fails` on does not,
  // assuming memory grows with the swept value.
  void Bisect() {
    const std::vector<int32_t> candidates = SearchCandidates(spec_.sweep);
    int64_t fits = -1;
    auto fails = static_cast<int64_t>(candidates.size());
    while (fails - fits > 1) {
      const int64_t middle = fits + (fails - fits) / 2;
      if (RunPoint(candidates[static_cast<size_t>(middle)]).oom) {
        fails = middle;
      } else {
        fits = middle;
      }
    }
  }

  const PointOutcome& RunPoint(int32_t value) {
    PointShape shape;
    shape.seq_len = spec_.training.seq_len;
    shape.micro_batch_size = spec_.training.micro_batch_size;
    shape.sweep_index = static_cast<int32_t>(points_.size());
    if (spec_.sweep.variable == SweepVariable::kSeqLen) {
      shape.seq_len = value;
    } else {
      shape.micro_batch_size = value;
    }
    last_ = RunTrainingPoint(spec_, config_, shape, context_);

    SweepPointResult point;
    point.sweep_index = shape.sweep_index;
    point.value = value;
    point.oom = last_->oom;
    point.anatomy = last_->anatomy;
    point.step_time_seconds = last_->median_step_time_seconds;
    point.tokens_per_second = last_->tokens_per_second;
    point.final_loss = last_->final_loss;
    context_.sink->SweepPoint(point);
    points_.push_back(point);
    if (!last_->oom && (!best_ || value > best_value_)) {
      best_ = last_;
      best_value_ = value;
    }
    return *last_;
  }

  const ExperimentSpec& spec_;
  const Qwen2Config& config_;
  const WorkerContext& context_;
  std::vector<SweepPointResult> points_;
  std::optional<PointOutcome> last_;
  std::optional<PointOutcome> best_;
  int32_t best_value_ = 0;
};

}  // namespace

std::vector<int32_t> SearchCandidates(const SpecSweep& sweep) {
  std::vector<int32_t> candidates;
  const int64_t g = sweep.search_granularity;
  for (int64_t value = (sweep.search_min + g - 1) / g * g; value <= sweep.search_max; value += g) {
    candidates.push_back(static_cast<int32_t>(value));
  }
  return candidates;
}

ExperimentResult RunExperiment(const ExperimentSpec& spec, const Qwen2Config& config, const WorkerContext& context) {
  if (spec.sweep.active()) return SweepRunner(spec, config, context).Run();
  ExperimentResult result;
  const PointShape shape{spec.training.seq_len, spec.training.micro_batch_size, 0};
  const PointOutcome point = RunTrainingPoint(spec, config, shape, context);
  result.oom = point.oom;
  result.has_report = !point.oom;
  if (result.has_report) FillFromPoint(point, result.report);
  return result;
}

}  // namespace vramlab::worker
