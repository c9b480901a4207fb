#include "client/svg_text.h"

#include "absl/strings/str_format.h"
#include "client/report_svg.h"

namespace vramlab::client {

const char* SvgAnchorName(TextAnchor anchor) {
  switch (anchor) {
    case TextAnchor::kMiddle:
      return "middle";
    case TextAnchor::kEnd:
      return "end";
    default:
      return "start";
  }
}

// A <text> of a placed label (class "label"), with a white halo so that lines under it do not
// strike it through.
std::string SvgLabelText(const std::string& id, const LabelCandidates& label,
                         std::pair<double, double> at, const char* color) {
  return absl::StrFormat(
      "<text id=\"%s\" class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"%g\"%s "
      "text-anchor=\"%s\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"3\" "
      "paint-order=\"stroke\">%s</text>\n",
      id, at.first, at.second, label.style.font_size,
      label.style.bold ? " font-weight=\"bold\"" : "", SvgAnchorName(label.anchor), color,
      XmlEscape(label.text));
}

// A fixed <text>, its box taken in `layout`.
std::string SvgFixedText(LabelLayout& layout, const std::string& attributes,
                         const std::string& text, double x, double y, TextStyle style,
                         TextAnchor anchor) {
  layout.OccupyText(text, x, y, style, anchor);
  return absl::StrFormat(
      "<text %sx=\"%.1f\" y=\"%.1f\" font-size=\"%g\"%s text-anchor=\"%s\">%s</text>\n",
      attributes.empty() ? "" : attributes + " ", x, y, style.font_size,
      style.bold ? " font-weight=\"bold\"" : "", SvgAnchorName(anchor), XmlEscape(text));
}

}  // namespace vramlab::client
