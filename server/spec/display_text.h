// Text that other users see in `vramlab ls`, `show` and reports (experiment names, request ids):
// it must be valid UTF-8 and free of characters that change how the text around it is shown.
#ifndef VRAMLAB_SERVER_SPEC_DISPLAY_TEXT_H_
#define VRAMLAB_SERVER_SPEC_DISPLAY_TEXT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vramlab::server {

// OK when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF) holding no C0 or C1 control character, DEL, and no bidirectional formatting
// character (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), which could make one
// user's name reorder the columns of another's listing. INVALID_ARGUMENT naming `field` and the
// byte offset otherwise; the message never repeats the text.
absl::Status CheckDisplayText(absl::string_view field, absl::string_view text);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_DISPLAY_TEXT_H_
