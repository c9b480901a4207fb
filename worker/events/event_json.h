// Protobuf canonical JSON (proto3 JSON mapping) of the worker events: lowerCamelCase names, enums
// by name, int64 as decimal strings, non-finite doubles as "NaN"/"Infinity". The daemon parses
// these with JsonStringToMessage and rejects unknown fields, so every key here must exist in
// proto/vramlab/v1/memory.proto (tests/contract/worker_events_contract_test.cc checks it).
#ifndef VRAMLAB_WORKER_EVENTS_EVENT_JSON_H_
#define VRAMLAB_WORKER_EVENTS_EVENT_JSON_H_

#include <nlohmann/json.hpp>

#include "worker/events/worker_events.h"

namespace vramlab::worker {

const char* PhaseName(Phase phase);

nlohmann::json ToJson(const MemorySample& sample);
nlohmann::json ToJson(const PhaseEvent& event);
nlohmann::json ToJson(const StepResult& step);
nlohmann::json ToJson(const MemoryAnatomy& anatomy);
nlohmann::json ToJson(const OomReport& oom);
nlohmann::json ToJson(const SweepPointResult& point);
nlohmann::json ToJson(const FinalReport& report);
nlohmann::json ToJson(const WorkerStarted& started);
nlohmann::json ToJson(const WorkerError& error);
nlohmann::json NoticeJson(NoticeLevel level, const std::string& message);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_EVENTS_EVENT_JSON_H_
