// Text geometry for the SVG report: the width a label takes in DejaVu Sans (the font the SVG names
// first), its box, cutting a label to a width, and placing labels so that no two boxes intersect.
#ifndef VRAMLAB_CLIENT_TEXT_LAYOUT_H_
#define VRAMLAB_CLIENT_TEXT_LAYOUT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vramlab::client {

enum class TextAnchor { kStart, kMiddle, kEnd };

struct TextStyle {
  double font_size = 11;
  bool bold = false;
};

// An axis-aligned box in SVG user units; top < bottom.
struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  // True when the interiors overlap (boxes that only touch do not).
  bool Intersects(const Box& other) const;
  bool Inside(const Box& frame) const;
};

// Advance width of `text` at `style` in DejaVu Sans (its ASCII advances; any other character
// counts one em, so the estimate errs wide).
double TextWidth(absl::string_view text, const TextStyle& style);

// The box a <text> drawn at x with baseline y and `anchor` occupies: from the ascender to the
// descender of the font, plus `pad` on every side.
Box TextBox(absl::string_view text, double x, double baseline, const TextStyle& style,
            TextAnchor anchor, double pad = 1.0);

// `text` cut with "..." to what fits `width` (whole if it fits); cuts on a UTF-8 boundary.
std::string FitText(const std::string& text, double width, const TextStyle& style);

// A label that may go in one of several places: its text, style, anchor and candidate positions
// (x, baseline) in order of preference.
struct LabelCandidates {
  std::string text;
  TextStyle style;
  TextAnchor anchor = TextAnchor::kStart;
  std::vector<std::pair<double, double>> positions;
};

// Boxes already taken on the picture; labels are placed one by one where nothing is.
class LabelLayout {
 public:
  explicit LabelLayout(Box frame) : frame_(frame) {}

  // Marks `box` as taken (a fixed text, a marker).
  void Occupy(const Box& box) { taken_.push_back(box); }
  // Marks the box of a fixed text as taken and returns it.
  Box OccupyText(absl::string_view text, double x, double baseline, const TextStyle& style,
                 TextAnchor anchor);
  bool IsFree(const Box& box) const;

  // The first candidate position whose box is inside the frame and free, which it then takes.
  // When none is, the candidates are tried again moved down (then up) in steps of one line
  // height, up to `max_shift`; nullopt when even that finds no place.
  std::optional<std::pair<double, double>> Place(const LabelCandidates& label, double max_shift);

 private:
  Box frame_;
  std::vector<Box> taken_;
};

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_TEXT_LAYOUT_H_
