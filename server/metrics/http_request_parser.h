// An incremental parser of an HTTP/1.x request head (request line and header fields, RFC 9112
// sections 2-5) for the metrics endpoint. Bytes may arrive in pieces of any size, down to one byte
// at a time; each byte is looked at once, and only the current unfinished line is buffered, so a
// head costs O(its size) time and at most `max_head_bytes` memory.
//
// The parser stops at the empty line that ends the head. Header fields are checked for shape only
// and not kept: the endpoint needs none of them. A malformed request line is refused as soon as it
// is complete, and a method that cannot be a token as soon as its first wrong byte arrives (a TLS
// handshake, say), so garbage gets its 400 without waiting for a whole head.
//
// Not thread-safe; one parser per connection.
#ifndef VRAMLAB_SERVER_METRICS_HTTP_REQUEST_PARSER_H_
#define VRAMLAB_SERVER_METRICS_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace vramlab::server {

struct HttpRequest {
  std::string method;     // as sent; methods are case-sensitive ("GET", not "get")
  std::string path;       // the target's path, without query or fragment: "/metrics"
  int minor_version = 1;  // HTTP/1.<minor_version>
};

class HttpRequestParser {
 public:
  enum class State {
    kIncomplete,  // more bytes are needed
    kComplete,    // the whole head arrived and is well-formed: request() is valid
    kError,       // refused: error_status() says how to answer
  };

  // Heads longer than `max_head_bytes` (request line, fields and the line ends) are refused with
  // 431. Empty lines before the request line count too.
  explicit HttpRequestParser(size_t max_head_bytes);

  // Consumes the next bytes of the connection and returns the state after them. Once the state is
  // kComplete or kError, later calls change nothing: bytes after the head (a body, a pipelined
  // request) are ignored.
  State Feed(absl::string_view data);

  State state() const { return state_; }
  // Valid in state kComplete.
  const HttpRequest& request() const { return request_; }
  // In state kError: 400 (malformed), 431 (head too large) or 505 (HTTP major version not 1).
  int error_status() const { return error_status_; }
  // Bytes of the head consumed so far.
  size_t head_bytes() const { return head_bytes_; }

 private:
  State Fail(int status);
  // Handles one whole line, without its line end.
  State OnLine(absl::string_view line);
  State OnRequestLine(absl::string_view line);
  State OnFieldLine(absl::string_view line);

  const size_t max_head_bytes_;
  State state_ = State::kIncomplete;
  int error_status_ = 0;
  size_t head_bytes_ = 0;
  // The bytes of the current line received so far (its line end not yet seen).
  std::string line_;
  bool have_request_line_ = false;
  // While the request line is unfinished: whether its first space (the end of the method) came.
  bool method_ended_ = false;
  HttpRequest request_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_HTTP_REQUEST_PARSER_H_
