#include "client/text_layout.h"

#include <algorithm>

namespace vramlab::client {
namespace {

// Advances of DejaVu Sans (Book and Bold) for the printable ASCII characters 0x20..0x7E, in
// thousandths of an em, as a browser measures them.
constexpr int kBook[95] = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838};
constexpr int kBold[95] = {348, 456, 521, 838, 696,  1002, 872, 306,  457, 457, 523, 838, 380, 415,
                           380, 365, 696, 696, 696,  696,  696, 696,  696, 696, 696, 696, 400, 400,
                           838, 838, 838, 580, 1000, 774,  762, 734,  830, 683, 683, 821, 837, 372,
                           372, 775, 637, 995, 837,  850,  733, 850,  770, 720, 682, 812, 774, 1103,
                           771, 724, 725, 457, 365,  457,  838, 500,  500, 675, 716, 593, 716, 678,
                           435, 716, 712, 343, 343,  665,  343, 1042, 712, 687, 716, 716, 493, 595,
                           478, 712, 652, 924, 645,  652,  582, 712,  365, 712, 838};

// DejaVu Sans's ascender and descender, in ems.
constexpr double kAscent = 0.928, kDescent = 0.236;

}  // namespace

bool Box::Intersects(const Box& o) const {
  return left < o.right && o.left < right && top < o.bottom && o.top < bottom;
}

bool Box::Inside(const Box& frame) const {
  return left >= frame.left && right <= frame.right && top >= frame.top && bottom <= frame.bottom;
}

double TextWidth(absl::string_view text, const TextStyle& style) {
  int thousandths = 0;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      thousandths += (style.bold ? kBold : kBook)[byte - 0x20];
    } else if ((byte & 0xC0) != 0x80) {  // the first byte of a non-ASCII character
      thousandths += 1000;
    }
  }
  return thousandths * style.font_size / 1000.0;
}

Box TextBox(absl::string_view text, double x, double baseline, const TextStyle& style,
            TextAnchor anchor, double pad) {
  const double width = TextWidth(text, style);
  const double left = anchor == TextAnchor::kStart    ? x
                      : anchor == TextAnchor::kMiddle ? x - width / 2
                                                      : x - width;
  return Box{left - pad, baseline - kAscent * style.font_size - pad, left + width + pad,
             baseline + kDescent * style.font_size + pad};
}

std::string FitText(const std::string& text, double width, const TextStyle& style) {
  if (TextWidth(text, style) <= width) return text;
  const double room = width - TextWidth("...", style);
  size_t cut = 0;
  for (size_t end = 1; end <= text.size(); ++end) {
    if (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) continue;
    if (TextWidth(absl::string_view(text).substr(0, end), style) > room) break;
    cut = end;
  }
  return text.substr(0, cut) + "...";
}

Box LabelLayout::OccupyText(absl::string_view text, double x, double baseline,
                            const TextStyle& style, TextAnchor anchor) {
  const Box box = TextBox(text, x, baseline, style, anchor);
  Occupy(box);
  return box;
}

bool LabelLayout::IsFree(const Box& box) const {
  return std::none_of(taken_.begin(), taken_.end(),
                      [&](const Box& t) { return t.Intersects(box); });
}

std::optional<std::pair<double, double>> LabelLayout::Place(const LabelCandidates& label,
                                                            double max_shift) {
  const double line = (kAscent + kDescent) * label.style.font_size + 2;
  std::vector<double> shifts = {0};
  for (double s = line; s <= max_shift; s += line) {
    shifts.push_back(s);
    shifts.push_back(-s);
  }
  for (double shift : shifts) {
    for (const auto& [x, y] : label.positions) {
      const Box box = TextBox(label.text, x, y + shift, label.style, label.anchor);
      if (box.Inside(frame_) && IsFree(box)) {
        Occupy(box);
        return std::pair{x, y + shift};
      }
    }
  }
  return std::nullopt;
}

}  // namespace vramlab::client
