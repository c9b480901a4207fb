// SVG <text> elements of the report pictures, each placed through a LabelLayout so that no two
// texts overlap (text_layout.h).
#ifndef VRAMLAB_CLIENT_SVG_TEXT_H_
#define VRAMLAB_CLIENT_SVG_TEXT_H_

#include <string>
#include <utility>

#include "client/text_layout.h"

namespace vramlab::client {

// The SVG text-anchor value of `anchor`.
const char* SvgAnchorName(TextAnchor anchor);

// A <text> of a placed label (class "label") at `at`, with a white halo so that lines under it
// do not strike it through.
std::string SvgLabelText(const std::string& id, const LabelCandidates& label,
                         std::pair<double, double> at, const char* color);

// A fixed <text> at (x, y) with extra `attributes` (e.g. id="title"), its box taken in `layout`.
std::string SvgFixedText(LabelLayout& layout, const std::string& attributes,
                         const std::string& text, double x, double y, TextStyle style,
                         TextAnchor anchor);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_SVG_TEXT_H_
