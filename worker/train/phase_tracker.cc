#include "worker/train/phase_tracker.h"

namespace vramlab::worker {
namespace {

PhaseEvent PhaseEventAt(PhaseEdge edge, const LoopPosition& position, const MemorySample& reading) {
  PhaseEvent event;
  Stamp(position, &event);
  event.edge = edge;
  event.memory = reading;
  event.has_memory = true;
  return event;
}

}  // namespace

void PhaseTracker::Begin(Phase phase, int32_t step, int32_t micro_step) {
  open_ = PhaseMeasurement{};
  open_.position = LoopPosition{phase, step, micro_step, sweep_index_};
  monitor_->SetPosition(open_.position);
  open_.begin = monitor_->Read(/*free_blocks=*/true);
  sink_->PhaseChange(PhaseEventAt(PhaseEdge::kBegin, open_.position, open_.begin));
  if (monitor_->ledger() != nullptr) {
    monitor_->backend()->SettleLedger();
    open_.ledger_mark = monitor_->ledger()->Mark();
  }
  monitor_->BeginWindow();
}

PhaseMeasurement PhaseTracker::End() {
  // The phase's last allocation reaches the ledger before anyone reads it.
  if (monitor_->ledger() != nullptr) monitor_->backend()->SettleLedger();
  if (closer_) closer_(open_.position, open_.ledger_mark);
  const AllocatorStats window = monitor_->backend()->Stats();
  open_.window_peak_allocated = window.peak_allocated;
  open_.window_peak_reserved = window.peak_reserved;
  open_.end = monitor_->Read(/*free_blocks=*/true);
  open_.seconds = open_.end.time_seconds - open_.begin.time_seconds;
  sink_->PhaseChange(PhaseEventAt(PhaseEdge::kEnd, open_.position, open_.end));
  if (observer_) observer_(open_);
  return open_;
}

}  // namespace vramlab::worker
