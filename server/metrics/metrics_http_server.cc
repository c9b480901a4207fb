#include "server/metrics/metrics_http_server.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

void InitCivetwebOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

// A whole response with no body (errors), then the connection closes.
int Reply(mg_connection* connection, int code, const char* reason) {
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n%s\n",
            code, reason, std::strlen(reason) + 1, reason);
  return code;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options, std::function<std::string()> body) {
  if (options.listen_address.empty()) {
    return absl::InvalidArgumentError("--metrics-listen is empty");
  }
  if (options.threads < 1 || options.threads > 1024) {
    return absl::InvalidArgumentError("--metrics-threads: 1..1024");
  }
  const int64_t timeout_ms = absl::ToInt64Milliseconds(options.request_timeout);
  if (timeout_ms < 1 || timeout_ms > 3600 * 1000) {
    return absl::InvalidArgumentError("--metrics-request-timeout: 1ms..1h");
  }
  InitCivetwebOnce();
  const std::string threads = absl::StrCat(options.threads);
  const std::string timeout = absl::StrCat(timeout_ms);
  const char* config[] = {"listening_ports", options.listen_address.c_str(),
                          "num_threads", threads.c_str(),
                          "request_timeout_ms", timeout.c_str(),
                          "enable_keep_alive", "no",
                          // Room for a burst of connections while every thread is busy.
                          "connection_queue", "256",
                          nullptr};
  mg_callbacks callbacks{};
  // Keeps civetweb's own messages off the daemon's stderr; failures come back as a Status.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.configuration_options = config;
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{&error_code, error_text, sizeof error_text};

  auto server = std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(body)));
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", options.listen_address, ": ", error_text));
  }
  mg_server_port ports[4];
  const int count = mg_get_server_ports(server->context_, 4, ports);
  if (count < 1 || ports[0].port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics server on ", options.listen_address, " listens on no port"));
  }
  server->port_ = ports[0].port;
  // "/" matches every path: HandleRequest answers 404 for anything but /metrics.
  mg_set_request_handler(server->context_, "/", &MetricsHttpServer::HandleRequest, server.get());
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int MetricsHttpServer::HandleRequest(mg_connection* connection, void* self) {
  const mg_request_info* request = mg_get_request_info(connection);
  const char* path = request->local_uri != nullptr ? request->local_uri : "";
  if (std::strcmp(path, "/metrics") != 0) return Reply(connection, 404, "Not Found");
  const bool head = std::strcmp(request->request_method, "HEAD") == 0;
  if (!head && std::strcmp(request->request_method, "GET") != 0) {
    return Reply(connection, 405, "Method Not Allowed");
  }
  const std::string body = static_cast<MetricsHttpServer*>(self)->body_();
  mg_printf(connection,
            "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            kContentType, body.size());
  if (!head) mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace vramlab::server
