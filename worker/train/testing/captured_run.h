// Test support: runs the worker in this process (RunWorker) and returns its events as JSON.
// In-process runs skip LibTorch's start-up cost per run; the counting CPU allocator is global, so
// runs must not overlap (GoogleTest runs tests one at a time).
#ifndef VRAMLAB_WORKER_TRAIN_TESTING_CAPTURED_RUN_H_
#define VRAMLAB_WORKER_TRAIN_TESTING_CAPTURED_RUN_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/events/event_sink.h"
#include "worker/train/run_worker.h"

namespace vramlab::worker::testing {

// Parameters of the tiny preset (testdata/README.md).
inline constexpr int64_t kTinyParameters = 125504;

struct CapturedRun {
  int exit_code = -1;
  std::vector<nlohmann::json> events;

  // Events whose payload key is `key` ("phase", "oom", ...).
  std::vector<nlohmann::json> Of(const std::string& key) const {
    std::vector<nlohmann::json> found;
    for (const auto& e : events) {
      if (e.contains(key)) found.push_back(e[key]);
    }
    return found;
  }
  // The payload of the END phase event of `phase` at (step, micro_step, sweep_index).
  nlohmann::json PhaseEnd(const std::string& phase, int step, int micro_step,
                          int sweep_index = 0) const {
    for (const auto& p : Of("phase")) {
      if (p["phase"] == phase && p["edge"] == "END" && p["step"] == step &&
          p["microStep"] == micro_step && p["sweepIndex"] == sweep_index) {
        return p;
      }
    }
    throw std::runtime_error("no END event for " + phase);
  }
};

// int64 fields are JSON strings in the canonical mapping.
inline int64_t Int64(const nlohmann::json& value) {
  return value.is_string() ? std::stoll(value.get<std::string>()) : value.get<int64_t>();
}

inline CapturedRun RunCaptured(const std::string& spec_json, const WorkerHooks& hooks = {}) {
  std::FILE* file = std::tmpfile();
  if (file == nullptr) throw std::runtime_error("tmpfile failed");
  CapturedRun run;
  {
    EventSink sink(fileno(file));
    run.exit_code = RunWorker(spec_json, sink, hooks);
  }
  std::rewind(file);
  std::string line;
  int c;
  while ((c = std::fgetc(file)) != EOF) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    run.events.push_back(nlohmann::json::parse(line));
    line.clear();
  }
  std::fclose(file);
  return run;
}

}  // namespace vramlab::worker::testing

#endif  // VRAMLAB_WORKER_TRAIN_TESTING_CAPTURED_RUN_H_
