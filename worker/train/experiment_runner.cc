#include "worker/train/experiment_runner.h"

#include <optional>
#include <string>

#include "common/spec/parallel_rules.h"
#include "common/spec/spec_ranges.h"

namespace vramlab::worker {
namespace {

void FillFromPoint(const FixedShapeOutcome& point, FinalReport& report) {
  report.anatomy = point.anatomy;
  report.attention_backend = point.attention_backend;
  report.median_step_time_seconds = point.median_step_time_seconds;
  report.tokens_per_second = point.tokens_per_second;
  report.mfu = point.mfu;
  report.final_loss = point.final_loss;
  report.steady_steps = point.steady_steps;
  report.warmup_steps = point.warmup_steps;
  report.warmup_step_time_seconds = point.warmup_step_time_seconds;
}

class SweepRunner {
 public:
  SweepRunner(const ExperimentSpec& spec, const DecoderConfig& config, const WorkerContext& context)
      : spec_(spec), config_(config), context_(context) {}

  // Every point, in the sweep's order.
  ExperimentResult Run() {
    spec_rules::SweepOrder order = spec_rules::SweepOrderOf(spec_.sweep);
    while (std::optional<int32_t> value = order.Next())
      order.Record(RunPoint(order.next_index(), *value).oom);
    return Finish(order.ended_out_of_memory());
  }

  // Only `point`; its answer is out of memory when it ran out, whatever the sweep's mode (the
  // daemon applies the mode's rule over the points).
  ExperimentResult RunOne(const spec_rules::SweepPoint& point) {
    return Finish(RunPoint(point.index, point.value).oom);
  }

 private:
  ExperimentResult Finish(bool oom) {
    ExperimentResult result;
    result.oom = oom;
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

  const FixedShapeOutcome& RunPoint(int32_t index, int32_t value) {
    FixedShape shape;
    shape.seq_len = spec_.training.seq_len;
    shape.micro_batch_size = spec_.training.micro_batch_size;
    shape.sweep_index = index;
    if (spec_.sweep.variable == SweepVariable::kSeqLen) {
      shape.seq_len = value;
    } else {
      shape.micro_batch_size = value;
    }
    last_ = RunAtFixedShape(spec_, config_, shape, context_);

    SweepPointResult point;
    point.sweep_index = shape.sweep_index;
    point.value = value;
    point.oom = last_->oom;
    point.anatomy = last_->anatomy;
    point.step_time_seconds = last_->median_step_time_seconds;
    point.tokens_per_second = last_->tokens_per_second;
    point.final_loss = last_->final_loss;
    point.mfu = last_->mfu;
    point.attention_backend = last_->attention_backend;
    point.steady_steps = last_->steady_steps;
    point.warmup_steps = last_->warmup_steps;
    point.warmup_step_time_seconds = last_->warmup_step_time_seconds;
    context_.sink->SweepPoint(point);
    points_.push_back(point);
    if (!last_->oom && (!best_ || value > best_value_)) {
      best_ = last_;
      best_value_ = value;
    }
    return *last_;
  }

  const ExperimentSpec& spec_;
  const DecoderConfig& config_;
  const WorkerContext& context_;
  std::vector<SweepPointResult> points_;
  std::optional<FixedShapeOutcome> last_;
  std::optional<FixedShapeOutcome> best_;
  int32_t best_value_ = 0;
};

}  // namespace

void CheckSweepPoint(const ExperimentSpec& spec,
                     const std::optional<spec_rules::SweepPoint>& point) {
  if (!point.has_value()) {
    if (ParallelActive(spec.parallel) && SweepActive(spec.sweep)) {
      throw SpecError(spec_rules::kSweepField, spec_rules::kParallelSweepNeedsPointMessage);
    }
    return;
  }
  const std::string flag =
      std::string(spec_rules::kSweepPointFlag) + " " + spec_rules::FormatSweepPoint(*point);
  if (!SweepActive(spec.sweep))
    throw SpecError(spec_rules::kSweepField, flag + " runs a point of a sweep; this spec has none");
  if (!spec_rules::SweepOrderOf(spec.sweep).MayRun(point->index, point->value)) {
    throw SpecError(spec_rules::kSweepField, flag + " is not a point of this spec's sweep");
  }
}

ExperimentResult RunExperiment(const ExperimentSpec& spec, const DecoderConfig& config,
                               const WorkerContext& context,
                               const std::optional<spec_rules::SweepPoint>& point) {
  if (point.has_value()) return SweepRunner(spec, config, context).RunOne(*point);
  if (SweepActive(spec.sweep)) return SweepRunner(spec, config, context).Run();
  ExperimentResult result;
  const FixedShape shape{spec.training.seq_len, spec.training.micro_batch_size, 0};
  const FixedShapeOutcome measured = RunAtFixedShape(spec, config, shape, context);
  result.oom = measured.oom;
  result.has_report = !measured.oom;
  if (result.has_report) FillFromPoint(measured, result.report);
  return result;
}

}  // namespace vramlab::worker
