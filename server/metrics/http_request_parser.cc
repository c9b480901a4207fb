#include "server/metrics/http_request_parser.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace vramlab::server {
namespace {

// RFC 9110 section 5.6.2: the characters of a token (methods, field names).
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Control characters other than horizontal tab, which no request line or field may carry.
bool IsControl(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (byte < 0x20 && c != '\t') || byte == 0x7f;
}

// The path of an origin-form ("/a?b") or absolute-form ("http://host/a?b") target; false for any
// other form. The asterisk form ("*", for OPTIONS) maps to "*".
bool PathOfTarget(absl::string_view target, std::string* path) {
  if (target == "*") {
    *path = "*";
    return true;
  }
  if (target[0] != '/') {
    size_t scheme_end = absl::string_view::npos;
    if (absl::StartsWithIgnoreCase(target, "http://")) scheme_end = 7;
    if (absl::StartsWithIgnoreCase(target, "https://")) scheme_end = 8;
    if (scheme_end == absl::string_view::npos) return false;
    const size_t authority_end = target.find_first_of("/?#", scheme_end);
    if (authority_end == absl::string_view::npos || target[authority_end] != '/') {
      *path = "/";
      return true;
    }
    target.remove_prefix(authority_end);
  }
  *path = std::string(target.substr(0, target.find_first_of("?#")));
  return true;
}

}  // namespace

HttpRequestParser::HttpRequestParser(size_t max_head_bytes) : max_head_bytes_(max_head_bytes) {}

HttpRequestParser::State HttpRequestParser::Fail(int status) {
  state_ = State::kError;
  error_status_ = status;
  line_.clear();
  return state_;
}

HttpRequestParser::State HttpRequestParser::Feed(absl::string_view data) {
  while (!data.empty() && state_ == State::kIncomplete) {
    if (head_bytes_ >= max_head_bytes_) return Fail(431);
    // The bytes up to and including the next line end, within what the head may still take.
    absl::string_view piece = data.substr(0, max_head_bytes_ - head_bytes_);
    const size_t newline = piece.find('\n');
    const bool line_ends = newline != absl::string_view::npos;
    if (line_ends) piece = piece.substr(0, newline + 1);
    data.remove_prefix(piece.size());
    head_bytes_ += piece.size();
    if (line_ends) piece.remove_suffix(1);

    // Refuse a method that cannot be a token at its first wrong byte. CR is left to OnLine: it is
    // allowed right before LF, so in an empty line before the request line too.
    if (!have_request_line_ && !method_ended_) {
      for (char c : piece) {
        if (c == ' ') {
          method_ended_ = true;
          break;
        }
        if (c != '\r' && !IsTokenChar(c)) return Fail(400);
      }
    }
    line_.append(piece.data(), piece.size());
    if (!line_ends) continue;
    absl::string_view line = line_;
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    // A bare CR is not a line end (RFC 9112 section 2.2); refusing it leaves no ambiguity.
    if (line.find('\r') != absl::string_view::npos) return Fail(400);
    OnLine(line);
    line_.clear();
  }
  return state_;
}

HttpRequestParser::State HttpRequestParser::OnLine(absl::string_view line) {
  if (!have_request_line_) {
    // Empty lines before the request line are ignored (RFC 9112 section 2.2).
    if (line.empty()) return state_;
    return OnRequestLine(line);
  }
  if (line.empty()) {
    state_ = State::kComplete;
    return state_;
  }
  return OnFieldLine(line);
}

HttpRequestParser::State HttpRequestParser::OnRequestLine(absl::string_view line) {
  // method SP request-target SP HTTP-version, single spaces.
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) return Fail(400);
  for (char c : parts[1]) {
    if (IsControl(c) || c == '\t') return Fail(400);
  }
  const absl::string_view version = parts[2];
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/") ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return Fail(400);
  }
  if (version[5] != '1') return Fail(505);
  if (!PathOfTarget(parts[1], &request_.path)) return Fail(400);
  request_.method = std::string(parts[0]);
  request_.minor_version = version[7] - '0';
  have_request_line_ = true;
  return state_;
}

HttpRequestParser::State HttpRequestParser::OnFieldLine(absl::string_view line) {
  // field-name ":" OWS field-value OWS. A line starting with whitespace would be an obsolete line
  // folding (RFC 9112 section 5.2), which a server may refuse.
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) return Fail(400);
  for (char c : line.substr(colon + 1)) {
    if (IsControl(c)) return Fail(400);
  }
  return state_;
}

}  // namespace vramlab::server
