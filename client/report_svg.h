// The report picture as standalone SVG: allocated and reserved memory over time on phase bands,
// the peak marked, the device limit and the prediction as reference lines, and the anatomy as a
// stacked bar. No scripts, fonts or links: it renders offline, inline in HTML too.
#ifndef VRAMLAB_CLIENT_REPORT_SVG_H_
#define VRAMLAB_CLIENT_REPORT_SVG_H_

#include <string>

#include "absl/strings/string_view.h"
#include "client/timeline.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// Stable identifiers for tests and styling: polyline#series-allocated and #series-reserved
// (data-points = vertex count), rect.phase-band[data-phase], circle#peak-marker[data-bytes],
// line#limit-line (or text#limit-note when the limit is far above the data),
// line#predicted-peak-line, polyline#predicted-reserved (data-points, data-max-bytes; the
// estimator's replayed reserved per phase, predicted_reserved.h), g#category-areas >
// polygon.category-area[data-category] (the live bytes by category over time, stacked),
// g#anatomy-bar[data-kind] > rect.anatomy-segment[data-category][data-bytes]. The bar is the
// anatomy at peak allocated (data-kind "at-peak", segments summing to it) where the report has that
// moment, else each category's maximum over the run ("measured") or the prediction ("predicted").
std::string RenderSvg(const vramlab::v1::Experiment& experiment, const Timeline& timeline);

// Escapes &, <, >, " and ' for XML text and attribute values.
std::string XmlEscape(absl::string_view text);

// Fill color of a phase band.
const char* PhaseColor(vramlab::v1::Phase phase);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_REPORT_SVG_H_
