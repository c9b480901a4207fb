// The non-picture report formats: a text chart for the terminal, CSV of the timeline, and JSON of
// the whole report; plus the self-contained HTML page around the SVG.
#ifndef VRAMLAB_CLIENT_REPORT_FORMATS_H_
#define VRAMLAB_CLIENT_REPORT_FORMATS_H_

#include <string>

#include "client/timeline.h"
#include "vramlab/v1/experiment.pb.h"

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

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_REPORT_FORMATS_H_
