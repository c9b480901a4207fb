#include "client/watch_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/fit_verdict_text.h"
#include "client/parallel_estimate_text.h"
#include "client/rank_views.h"

namespace vramlab::client {

using namespace vramlab::v1;  // NOLINT: many message types

WatchState::WatchState(const Experiment& experiment)
    : id_(experiment.id()),
      spec_(experiment.spec()),
      // A parallel run's points are each rank's: next to the prediction for one rank.
      prediction_(IsParallel(experiment) ? RankAsEstimate(experiment.prediction())
                                         : experiment.prediction()),
      state_(experiment.state()),
      queue_position_(experiment.queue_position()),
      slot_(experiment.slot()),
      slots_(experiment.slots().begin(), experiment.slots().end()),
      world_size_(IsParallel(experiment) ? WorldSize(experiment) : 1),
      reason_(experiment.state_reason()) {
  SetStartEstimate(experiment);
}

void WatchState::SetStartEstimate(const Experiment& experiment) {
  start_estimate_.Clear();
  start_estimate_.set_held(experiment.held());
  if (experiment.has_estimated_start_time()) {
    *start_estimate_.mutable_estimated_start_time() = experiment.estimated_start_time();
  }
  start_estimate_.set_start_estimate_basis(experiment.start_estimate_basis());
}

std::string WatchState::StartText() const {
  if (start_estimate_.held()) return "held";
  if (!start_estimate_.has_estimated_start_time()) return "";
  const std::string when = StartEstimateText(start_estimate_, absl::Now());
  return when == "now" ? "starts now" : absl::StrCat("starts ", when);
}

std::string WatchState::Prefix() const { return absl::StrCat(id_, " "); }

std::string WatchState::EventPrefix(const WorkerEvent& event) const {
  if (world_size_ < 2 && event.rank() == 0) return Prefix();
  return absl::StrCat(id_, " rank ", event.rank(), ": ");
}

int WatchState::TotalSteps() const {
  return spec_.training().steps() > 0 ? spec_.training().steps() : 1;
}

std::optional<std::string> WatchState::Apply(const ExperimentEvent& event) {
  last_sequence_ = std::max(last_sequence_, event.sequence());
  if (event.has_worker_event()) return ApplyWorkerEvent(event.worker_event());
  if (!event.has_state_change()) return std::nullopt;
  const StateChange& change = event.state_change();
  state_ = change.state();
  queue_position_ = change.queue_position();
  slot_ = change.slot();
  reason_ = change.reason();
  std::string line = absl::StrCat(Prefix(), StateName(state_));
  if (state_ == Experiment::QUEUED && queue_position_ > 0) {
    const std::string start = StartText();
    absl::StrAppend(&line, " (position ", queue_position_, " in queue",
                    start.empty() ? "" : absl::StrCat(", ", start), ")");
  } else if (state_ == Experiment::RUNNING) {
    absl::StrAppend(&line, " on ", SlotText());
  }
  if (!reason_.empty()) absl::StrAppend(&line, ": ", reason_);
  return line;
}

std::string WatchState::SlotText() const {
  if (world_size_ < 2) return absl::StrCat("slot ", slot_);
  if (slots_.empty()) return absl::StrCat("slot ", slot_, ", world size ", world_size_);
  return absl::StrCat("slots ", world_size_, "×[", absl::StrJoin(slots_, ","), "]");
}

void WatchState::ApplySample(const MemorySample& sample) {
  if (event_rank_ >= 0 && event_rank_ < world_size_ && world_size_ >= 2) {
    const size_t rank = static_cast<size_t>(event_rank_);
    if (rank_allocated_.size() <= rank) {
      rank_allocated_.resize(rank + 1, 0);
      rank_peak_.resize(rank + 1, 0);
    }
    rank_allocated_[rank] = sample.allocated_bytes();
    rank_peak_[rank] =
        std::max({rank_peak_[rank], sample.allocated_bytes(), sample.peak_allocated_bytes()});
  }
  // A parallel run's main reading and sparkline follow rank 0: ranks interleaved would saw-tooth.
  if (world_size_ >= 2 && event_rank_ != 0) return;
  has_sample_ = true;
  last_sample_ = sample;
  peak_allocated_ =
      std::max({peak_allocated_, sample.allocated_bytes(), sample.peak_allocated_bytes()});
  peak_reserved_ =
      std::max({peak_reserved_, sample.reserved_bytes(), sample.peak_reserved_bytes()});
  recent_allocated_.push_back(sample.allocated_bytes());
  if (recent_allocated_.size() > kSparklineLength) recent_allocated_.pop_front();
}

std::optional<std::string> WatchState::ApplyWorkerEvent(const WorkerEvent& event) {
  event_rank_ = event.rank();
  const std::string prefix = EventPrefix(event);
  switch (event.payload_case()) {
    case WorkerEvent::kStarted: {
      const WorkerStarted& s = event.started();
      device_ = s.device_name();
      return absl::StrCat(prefix,
                          "worker started: ", s.device_name().empty() ? "?" : s.device_name(),
                          ", torch ", s.torch_version(), ", ", s.parameter_count(), " parameters");
    }
    case WorkerEvent::kPhase: {
      const PhaseEvent& p = event.phase();
      if (p.sweep_index() != sweep_index_) steps_done_in_point_ = 0;
      phase_ = p.phase();
      step_ = p.step();
      micro_step_ = p.micro_step();
      sweep_index_ = p.sweep_index();
      if (p.has_memory()) ApplySample(p.memory());
      return std::nullopt;
    }
    case WorkerEvent::kSample:
      ApplySample(event.sample());
      return std::nullopt;
    case WorkerEvent::kStep: {
      const StepResult& s = event.step();
      last_step_ = s;
      steps_done_in_point_ = s.step() + 1;
      return absl::StrFormat("%sstep %d/%d loss %.4f  %s  %.0f tok/s  peak %s", prefix,
                             s.step() + 1, TotalSteps(), s.loss(),
                             FormatSeconds(s.step_time_seconds()), s.tokens_per_second(),
                             FormatBytes(s.peak_allocated_bytes()));
    }
    case WorkerEvent::kSweepPoint: {
      const SweepPointResult& p = event.sweep_point();
      const char* variable =
          spec_.sweep().variable() == MICRO_BATCH_SIZE ? "micro_batch" : "seq_len";
      // Measured, then the prediction for the same point where the estimate has it.
      const std::string predicted = PointPredictionText(prediction_, p.value());
      const std::string suffix = predicted.empty() ? "" : absl::StrCat(" (", predicted, ")");
      if (p.oom()) {
        return absl::StrCat(prefix, "sweep point ", p.sweep_index() + 1, " ", variable, "=",
                            p.value(), ": OOM", suffix);
      }
      return absl::StrCat(prefix, "sweep point ", p.sweep_index() + 1, " ", variable, "=",
                          p.value(), ": fits, peak allocated ",
                          FormatBytes(p.anatomy().peak_allocated_bytes()), ", ",
                          FormatSeconds(p.step_time_seconds()), "/step", suffix);
    }
    case WorkerEvent::kOom: {
      const OomReport& oom = event.oom();
      std::string line = absl::StrCat(prefix, "OOM in ", PhaseName(oom.phase()), " (step ",
                                      oom.step(), ", micro-step ", oom.micro_step(),
                                      "): tried to allocate ", FormatBytes(oom.requested_bytes()),
                                      ", ", FormatBytes(oom.free_bytes()), " free");
      if (oom.has_memory()) {
        absl::StrAppend(&line, "; allocated ", FormatBytes(oom.memory().allocated_bytes()),
                        ", reserved ", FormatBytes(oom.memory().reserved_bytes()),
                        " at the failure, peak ", FormatBytes(oom.memory().peak_allocated_bytes()),
                        " allocated");
      }
      return line;
    }
    case WorkerEvent::kNotice:
      return absl::StrCat(prefix,
                          event.notice().level() == Notice::WARNING ? "warning: " : "notice: ",
                          event.notice().message());
    case WorkerEvent::kError:
      return absl::StrCat(
          prefix, "worker error: ", event.error().message(),
          event.error().field().empty() ? "" : absl::StrCat(" (", event.error().field(), ")"));
    case WorkerEvent::kReport:
      return absl::StrCat(prefix, "final report received");
    default:
      return std::nullopt;
  }
}

std::string Sparkline(const std::deque<int64_t>& values) {
  static constexpr const char* kLevels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (values.empty()) return "";
  const int64_t max = *std::max_element(values.begin(), values.end());
  std::string out;
  for (int64_t v : values) {
    const int level = max <= 0 ? 0 : static_cast<int>((static_cast<double>(v) / max) * 7.0 + 0.5);
    out += kLevels[std::clamp(level, 0, 7)];
  }
  return out;
}

std::string ProgressBar(int done, int total, int width) {
  const int filled = total <= 0 ? 0 : std::clamp(done * width / total, 0, width);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '-'), "]");
}

std::string WatchState::RenderFrame() const {
  std::string out =
      absl::StrCat(id_, "  ", spec_.name().empty() ? "-" : spec_.name(), "  ", StateName(state_));
  if (state_ == Experiment::QUEUED) {
    if (queue_position_ > 0) absl::StrAppend(&out, "  position ", queue_position_, " in queue");
    const std::string start = StartText();
    if (!start.empty()) absl::StrAppend(&out, "  ", start);
    absl::StrAppend(&out, "\n  ", SpecSummary(spec_), "\n");
    if (start_estimate_.has_estimated_start_time() && !start_estimate_.held()) {
      absl::StrAppend(&out, "  start estimate by ",
                      FormatTimestamp(start_estimate_.estimated_start_time()));
      if (!start_estimate_.start_estimate_basis().empty()) {
        absl::StrAppend(&out, ", ", start_estimate_.start_estimate_basis());
      }
      absl::StrAppend(&out, "\n");
    }
    return out;
  }
  if (state_ == Experiment::RUNNING) absl::StrAppend(&out, "  ", SlotText());
  if (!device_.empty()) absl::StrAppend(&out, "  ", device_);
  absl::StrAppend(&out, "\n");
  const int total = TotalSteps();
  absl::StrAppend(&out, "  phase ", PhaseName(phase_), "  step ", std::min(step_ + 1, total), "/",
                  total, " ", ProgressBar(steps_done_in_point_, total, 24));
  if (spec_.training().grad_accum_steps() > 1) {
    absl::StrAppend(&out, "  micro-step ", micro_step_ + 1, "/",
                    spec_.training().grad_accum_steps());
  }
  if (spec_.has_sweep()) {
    absl::StrAppend(&out, "  sweep point ", sweep_index_ + 1);
    if (spec_.sweep().values_size() > 0) {
      absl::StrAppend(&out, "/", spec_.sweep().values_size());
      if (sweep_index_ < spec_.sweep().values_size()) {
        absl::StrAppend(&out, " (", spec_.sweep().values(sweep_index_), ")");
      }
    }
  }
  absl::StrAppend(&out, "\n");
  const char* allocated = world_size_ >= 2 ? "  rank 0 allocated " : "  allocated ";
  if (has_sample_) {
    absl::StrAppend(&out, allocated, FormatBytes(last_sample_.allocated_bytes()), " (peak ",
                    FormatBytes(peak_allocated_), ")  reserved ",
                    FormatBytes(last_sample_.reserved_bytes()), " (peak ",
                    FormatBytes(peak_reserved_), ")  fragmentation ",
                    FormatPercent(last_sample_.fragmentation_ratio()), "\n");
    absl::StrAppend(&out, allocated, Sparkline(recent_allocated_), "\n");
  }
  for (size_t rank = 0; rank < rank_allocated_.size(); ++rank) {
    absl::StrAppend(&out, "  rank ", rank, ": allocated ", FormatBytes(rank_allocated_[rank]),
                    " (peak ", FormatBytes(rank_peak_[rank]), ")\n");
  }
  if (last_step_.has_value()) {
    absl::StrAppend(
        &out, absl::StrFormat("  last step: loss %.4f  %s/step  %.0f tok/s\n", last_step_->loss(),
                              FormatSeconds(last_step_->step_time_seconds()),
                              last_step_->tokens_per_second()));
  }
  return out;
}

}  // namespace vramlab::client
