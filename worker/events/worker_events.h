// The worker's events are vramlab.v1.WorkerEvent (proto/vramlab/v1/memory.proto) as the plain
// structs generated from it (schema/plain_proto.py): the types below are those structs, and
// event_sink.h writes them with the generated canonical-JSON writer. No field list is kept here.
//
// What the worker adds is LoopPosition, the loop's place that it stamps on samples, phase events,
// OOM reports and peak moments (each proto message repeats phase/step/micro_step/sweep_index).
#ifndef VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_
#define VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_

#include <cstdint>

#include "schema/vramlab_v1.plain.h"

namespace vramlab::worker {

using Phase = plain::Phase;
using PhaseEdge = plain::PhaseEdge;
using DeviceKind = plain::DeviceKind;
using ErrorKind = plain::WorkerError_Kind;
using NoticeLevel = plain::Notice_Level;

using CategoryBytes = plain::CategoryBytes;
using MemorySample = plain::MemorySample;
using PhaseEvent = plain::PhaseEvent;
using StepResult = plain::StepResult;
using PeakAllocatedMoment = plain::PeakAllocatedMoment;
using PeakReservedMoment = plain::PeakReservedMoment;
using MemoryAnatomy = plain::MemoryAnatomy;
using OomReport = plain::OomReport;
using SweepPointResult = plain::SweepPointResult;
using FinalReport = plain::FinalReport;
using WorkerStarted = plain::WorkerStarted;
using WorkerError = plain::WorkerError;
using WorkerEvent = plain::WorkerEvent;

// Where the training loop is.
struct LoopPosition {
  Phase phase = Phase::kUnspecified;
  int32_t step = 0;
  int32_t micro_step = 0;
  int32_t sweep_index = 0;
};

// Writes `position` into a message's phase, step, micro_step and sweep_index.
template <typename Message>
void Stamp(const LoopPosition& position, Message* message) {
  message->phase = position.phase;
  message->step = position.step;
  message->micro_step = position.micro_step;
  message->sweep_index = position.sweep_index;
}

// The position a message was stamped with.
template <typename Message>
LoopPosition PositionOf(const Message& message) {
  return LoopPosition{message.phase, message.step, message.micro_step, message.sweep_index};
}

// Sets the sample's allocator-snapshot fields, all three present together (memory.proto).
inline void SetFreeBlockFragmentation(double ratio, int64_t largest_free_block_bytes,
                                      MemorySample* sample) {
  sample->free_block_fragmentation_ratio = ratio;
  sample->has_free_block_fragmentation_ratio = true;
  sample->has_free_block_fragmentation = true;
  sample->has_has_free_block_fragmentation = true;
  sample->largest_free_block_bytes = largest_free_block_bytes;
  sample->has_largest_free_block_bytes = true;
}

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_EVENTS_WORKER_EVENTS_H_
