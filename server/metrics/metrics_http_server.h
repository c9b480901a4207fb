// The HTTP endpoint of the exporter: GET /metrics on civetweb, answering with whatever `body`
// returns (the Prometheus text format). Other paths get 404, other methods 405.
//
// civetweb gives each connection one thread from a fixed pool while it reads the request, so
// idle or slow clients hold threads. The pool size and the request timeout bound that: a client
// that has not sent a whole request within `request_timeout` is disconnected, and scrapes are
// answered as long as fewer than `threads` such clients are connected at once (more wait in
// civetweb's accept queue until a thread is free). Connections are closed after each response
// (no keep-alive), so a scraper holds no thread between scrapes.
#ifndef VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct mg_context;
struct mg_connection;

namespace vramlab::server {

struct MetricsHttpOptions {
  // "HOST:PORT"; port 0 picks a free one.
  std::string listen_address;
  // Connections served at once (each idle or slow client holds one until its timeout).
  int threads = 16;
  // Longest time a client may take to send its request, and to take each write of the answer.
  absl::Duration request_timeout = absl::Seconds(5);
};

class MetricsHttpServer {
 public:
  // Serves `body` (called on civetweb threads, concurrently; must be thread-safe) on
  // options.listen_address. UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT for
  // bad options.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options, std::function<std::string()> body);
  // Stops accepting, waits for the threads to finish; `body` is not called afterwards.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(std::function<std::string()> body) : body_(std::move(body)) {}
  static int HandleRequest(mg_connection* connection, void* self);

  const std::function<std::string()> body_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_
