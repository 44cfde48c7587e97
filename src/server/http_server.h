// The HTTP side of `kipp serve` (cpp-httplib): routes, the security checks every request passes
// (Host against the bound address, CORS origins, the API key), limits, JSON and SSE responses,
// and noticing clients that leave. It knows nothing of K/V memory or sessions: requests go to
// the scheduler and answers come back through each request's channel.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/server_options.h"

namespace kipp::server {

// A bare address (as --host takes it) that names this machine only: "localhost", an IPv4
// literal in 127.0.0.0/8 (four dot-separated decimal octets), "::1" or "[::1]"; case-insensitive.
bool is_loopback_host(const std::string& host);
// Whether a request's Host header may reach a server bound to `bound_host` (DNS rebinding
// defence): "localhost", a 127.0.0.0/8 IPv4 literal or "[::1]", or the bound address itself,
// each with an optional ":port", case-insensitive. A wildcard bind (0.0.0.0, ::) accepts any.
bool host_header_allowed(const std::string& host_header, const std::string& bound_host);
// Why `host`:`port` cannot be bound (empty when it can): "port P is in use", or the system's
// reason. Binds and closes a probe socket with the server's socket options (SO_REUSEADDR only).
std::string bind_problem(const std::string& host, int port);
// Exactly equal, in time that depends only on the lengths of neither.
bool constant_time_equal(const std::string& a, const std::string& b);

class HttpServer {
 public:
  HttpServer(const ServerOptions& options, Scheduler& scheduler, Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address (port 0: any free port) and returns the port.
  Expected<int> bind();
  // Serves until stop(); false if the server failed.
  bool listen();
  // Stops accepting; in-flight handlers finish (the scheduler's stop ends their requests).
  void stop();
  // Stops admitting work, for a stop without losing requests: /health answers 503
  // {"status":"draining"} so a balancer takes the server out, every other route but /metrics
  // 503 (code shutting_down) with Connection: close; admitted requests go on. Not undone.
  void drain();
  // Requests admitted and not yet answered in full (a stream until its last byte).
  size_t in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kipp::server
