// The HTTP endpoint of the exporter: GET and HEAD /metrics, answered with whatever `body` returns
// (the Prometheus text format). Other paths get 404, other methods on /metrics 405, a malformed
// request 400, a request head over 8 KiB 431, an HTTP major version other than 1 505. One request
// per connection: every response carries "Connection: close" and the server closes after it.
//
// One thread serves every connection with poll() over non-blocking sockets, so no client holds a
// thread, and these limits keep idle, slow or flooding clients, however many, from delaying a
// scrape beyond the time its own request takes to arrive:
// - Request timeout. A connection that has not sent a whole request head within `request_timeout`
//   of being accepted is closed, however slowly it keeps sending. A response not written whole
//   within `request_timeout` of the request's arrival is abandoned and the connection reset:
//   the kernel's send buffer takes a whole answer at once from any client that reads, so only one
//   that stalls, or reads slowly to hold the connection, gets there.
// - Connection caps. At most `max_connections` connections are open, at most
//   `max_connections_per_address` of them from one remote IP. A new connection that would exceed
//   a cap makes room by closing the oldest evictable connection (of the whole server, or of its
//   own address): one that has not sent a whole request yet, or that was answered and is only
//   being drained before close. So a flood pushes out idle connections, and once an address is
//   over its cap, that address's own; a new scraper is never refused because of it. A scraper's
//   connection is closed this way only if a cap's worth of newer connections arrives between its
//   connect and its request. Connections whose response is being written are never evicted: a new
//   connection from an address whose every connection is in that state is closed at once, and
//   while the whole server is, new connections wait in the listen backlog.
// - Lingering close. After a response the server shuts down its sending side, then reads and
//   discards what the client still sends (an unread request body, a pipelined request) until the
//   client closes, for at most `request_timeout` and 64 KiB, so that its close does not reset the
//   connection before the client has read the response.
//
// `body` is called on the serving thread, once per GET or HEAD /metrics that has fully arrived,
// never concurrently with itself. No other connection is served while it runs, so it must be quick
// and must not block: serializing the registry qualifies (it holds the registry's lock briefly and
// reads /proc/self). Only a whole valid request makes it run, so idle clients cannot.
#ifndef VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace vramlab::server {

struct MetricsHttpOptions {
  // "HOST:PORT" (HOST an IPv4 address, [IPv6] or a name); port 0 picks a free one.
  std::string listen_address;
  // Connections open at once, 1..16384.
  int max_connections = 256;
  // Connections open at once from one remote IP address, 1..max_connections.
  int max_connections_per_address = 32;
  // Longest time a client may take to send its request head, and the server to write the
  // response; 1ms..1h.
  absl::Duration request_timeout = absl::Seconds(5);
};

// What the server has done since it started, for tests and diagnostics.
struct MetricsHttpStats {
  int open_connections = 0;
  int64_t accepted = 0;   // connections accepted
  int64_t responses = 0;  // responses written in full, any status
  int64_t evicted = 0;    // closed to make room under a connection cap
  int64_t refused = 0;    // closed on arrival: over the address cap with nothing to evict
  int64_t timed_out = 0;  // closed by the request timeout (request or response write unfinished)
};

class MetricsHttpServer {
 public:
  // Serves `body` on options.listen_address from a thread of its own. UNAVAILABLE when the address
  // cannot be bound, INVALID_ARGUMENT (naming the daemon flag) for bad options.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options, std::function<std::string()> body);
  // Stops serving, closes every connection and joins the serving thread; `body` is not called
  // after it returns.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  MetricsHttpStats stats() const;

 private:
  struct Connection;
  using ConnectionMap = std::map<uint64_t, std::unique_ptr<Connection>>;

  MetricsHttpServer(const MetricsHttpOptions& options, std::function<std::string()> body);

  // The serving thread's loop; returns once wake_fd_ is signalled.
  void Serve();
  // Accepts up to a burst of pending connections, making room under the caps.
  void AcceptPending();
  // Reads, writes or drains `connection` after poll() reported `events` on it.
  void OnEvents(Connection& connection, short events);
  void OnReadable(Connection& connection);
  // Builds the response to the connection's request (or its error) and starts writing it.
  void Respond(Connection& connection);
  // Writes what the socket takes; on completion moves to lingering close.
  void ContinueWriting(Connection& connection);
  // Closes connections whose deadline has passed.
  void ExpireDeadlines();
  // The oldest evictable connection, of `peer_ip` only when not empty; end() if none.
  ConnectionMap::iterator OldestEvictable(const std::string& peer_ip);
  enum class CloseReason {
    kDone,      // the client closed or failed, the response was drained, or the server stops
    kEvicted,   // made room under a connection cap
    kTimedOut,  // the request, or a write of the response, took longer than request_timeout
  };
  void CloseConnection(ConnectionMap::iterator it, CloseReason reason);
  void CloseConnection(Connection& connection, CloseReason reason);
  // Connections of the map that are not being written, i.e. could be evicted.
  int EvictableCount() const;

  const MetricsHttpOptions options_;
  const std::function<std::string()> body_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd the destructor signals to stop Serve()
  int port_ = 0;
  std::thread thread_;

  // Owned by the serving thread; no other thread touches them while it runs.
  ConnectionMap connections_;                         // by accept order: begin() is the oldest
  std::unordered_map<std::string, int> per_address_;  // open connections by remote IP
  int writing_ = 0;  // connections in connections_ whose response is being written
  uint64_t next_id_ = 0;
  // Accepting is paused until then after accept() failed for want of descriptors or memory.
  std::chrono::steady_clock::time_point accept_paused_until_;

  mutable absl::Mutex stats_mu_;
  MetricsHttpStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_METRICS_HTTP_SERVER_H_
