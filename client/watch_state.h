// What `watch` knows about a running experiment, folded from its event stream. Pure data: the
// live view and the line-per-update view both render from it, and tests drive it with events.
#ifndef VRAMLAB_CLIENT_WATCH_STATE_H_
#define VRAMLAB_CLIENT_WATCH_STATE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

class WatchState {
 public:
  // Allocated-bytes history kept for the sparkline.
  static constexpr size_t kSparklineLength = 48;

  explicit WatchState(const vramlab::v1::Experiment& experiment);

  // Folds one event in. Returns a line worth printing on its own (a state change, a finished
  // step, a sweep point, an OOM, a notice, an error), or nullopt for a memory sample or phase
  // boundary that only moves the live view.
  std::optional<std::string> Apply(const vramlab::v1::ExperimentEvent& event);

  // The multi-line live view (no trailing newline handling needed: every line ends in '\n'). Of
  // a parallel run: the slots in the header, rank 0's reading and sparkline, then a line per rank
  // with its allocated bytes and peak.
  std::string RenderFrame() const;

  // Takes the daemon's start estimate (estimated_start_time, start_estimate_basis, held) from
  // `experiment`, shown while the experiment is queued. The constructor takes the first one.
  void SetStartEstimate(const vramlab::v1::Experiment& experiment);

  vramlab::v1::Experiment::State state() const { return state_; }
  int64_t last_sequence() const { return last_sequence_; }
  const std::deque<int64_t>& recent_allocated() const { return recent_allocated_; }

 private:
  std::optional<std::string> ApplyWorkerEvent(const vramlab::v1::WorkerEvent& event);
  void ApplySample(const vramlab::v1::MemorySample& sample);
  // "exp-000042 ", or "exp-000042 rank 1: " for an event of a parallel run (or any event whose
  // rank is set).
  std::string Prefix() const;
  std::string EventPrefix(const vramlab::v1::WorkerEvent& event) const;
  // "slot 0"; for a parallel run "slots 2×[0,1]", or "slot 0, world size 2" before its slots are
  // known.
  std::string SlotText() const;
  int TotalSteps() const;
  // "starts in 3m00s" while queued with an estimate, "held" when held; "" without an estimate.
  std::string StartText() const;

  std::string id_;
  vramlab::v1::ExperimentSpec spec_;
  vramlab::v1::MemoryEstimate
      prediction_;  // the daemon's estimate at submit (per rank if parallel)
  vramlab::v1::Experiment::State state_;
  int32_t queue_position_ = 0;
  // Only the start estimate's fields (estimated_start_time, start_estimate_basis, held).
  vramlab::v1::Experiment start_estimate_;
  int32_t slot_ = 0;
  std::vector<int32_t> slots_;  // a parallel run's, rank r on slots_[r]; empty until known
  int world_size_ = 1;
  std::string reason_;
  int64_t last_sequence_ = 0;

  vramlab::v1::Phase phase_ = vramlab::v1::PHASE_UNSPECIFIED;
  int32_t step_ = 0;
  int32_t micro_step_ = 0;
  int32_t sweep_index_ = 0;
  int32_t steps_done_in_point_ = 0;
  bool has_sample_ = false;
  vramlab::v1::MemorySample last_sample_;
  int64_t peak_allocated_ = 0;
  int64_t peak_reserved_ = 0;
  std::deque<int64_t> recent_allocated_;
  std::optional<vramlab::v1::StepResult> last_step_;
  std::string device_;
  // A parallel run's last allocated bytes and peak allocated per rank, in rank order.
  std::vector<int64_t> rank_allocated_;
  std::vector<int64_t> rank_peak_;
  int32_t event_rank_ = 0;  // the rank of the event being applied
};

// "▁▂▅█" from `values`, scaled from 0 to their maximum.
std::string Sparkline(const std::deque<int64_t>& values);
// "[#########-----------]" of `width` cells for done/total.
std::string ProgressBar(int done, int total, int width);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_WATCH_STATE_H_
