// The non-picture report formats: a text chart for the terminal, CSV of the timeline, and JSON of
// the whole report; plus the self-contained HTML page around the SVG.
#ifndef VRAMLAB_CLIENT_REPORT_FORMATS_H_
#define VRAMLAB_CLIENT_REPORT_FORMATS_H_

#include <string>
#include <vector>

#include "client/timeline.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

// Summary, an ASCII chart of allocated ('#') and reserved ('.') memory over time with the peak
// column marked '*' and a row of phase letters, then the anatomy and sweep tables.
std::string RenderTextReport(const vramlab::v1::Experiment& experiment, const Timeline& timeline);

// Header "time_seconds,allocated_bytes,reserved_bytes,active_bytes,peak_allocated_bytes,
// fragmentation_ratio,phase,step,micro_step,sweep_index", one row per reading.
std::string RenderCsvReport(const Timeline& timeline);

// {"experiment": Experiment, "samples": [MemorySample...], "phases": [{"phase", "startSeconds",
// "endSeconds", "step", "microStep", "sweepIndex"}...], "peak": MemorySample}: protobuf JSON
// throughout (field names lowerCamelCase, int64 as strings).
std::string RenderJsonReport(const vramlab::v1::Experiment& experiment, const Timeline& timeline);

// A page with the summary, the SVG inline, and the anatomy and sweep tables. Inline CSS only and
// a Content-Security-Policy that forbids any fetch: it renders with no network.
std::string RenderHtmlReport(const vramlab::v1::Experiment& experiment, const Timeline& timeline);

// The recorded events as a Chrome trace (Trace Event Format, JSON object form) for Perfetto's UI
// and chrome://tracing: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {experiment,
// name, settings, outcome}}. Timestamps are microseconds since the worker started. Each rank is a
// process (pid = rank + 1, named by process_name metadata); per reading a counter "memory"
// {allocated, reserved} and, where the reading has them, "memory by category" {one series per
// category label}, in bytes; each phase a complete slice ("X", cat "phase", args step,
// micro_step, sweep_index; cut_short where the phase never ended) on thread 1 "phases"; each sweep
// point a slice on thread 2 "sweep points"; the OOM an instant ("i", cat "oom", process scope)
// whose args carry requested_bytes, free_bytes, allocated_bytes, phase, step and the message.
std::string RenderTraceReport(const vramlab::v1::Experiment& experiment,
                              const std::vector<vramlab::v1::ExperimentEvent>& events);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_REPORT_FORMATS_H_
