// The anatomy under a report's chart as a stacked bar (report_svg.h): at peak allocated where the
// run has that moment (segments summing to it), else each category's maximum over the run, or
// the prediction; a title saying which, a line of detail and a legend flowing in rows under it.
#ifndef VRAMLAB_CLIENT_ANATOMY_BAR_SVG_H_
#define VRAMLAB_CLIENT_ANATOMY_BAR_SVG_H_

#include <string>

#include "client/text_layout.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// Appends the bar (g#anatomy-bar[data-kind]) to `out`, `width` wide from `left`, its top at
// `bar_top`, the titles above it and the legend below, every text taken in `layout`. Returns the
// lowest baseline drawn.
double AnatomyBarSvg(const vramlab::v1::Experiment& experiment, double left, double width,
                     double bar_top, LabelLayout& layout, std::string* out);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_ANATOMY_BAR_SVG_H_
