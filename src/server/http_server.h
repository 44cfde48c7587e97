// The HTTP side of `kipp serve` (cpp-httplib): routes, the security checks every request passes
// (Host against the bound address, CORS origins, the API key), limits, JSON and SSE responses,
// and noticing clients that leave. It knows nothing of K/V memory or sessions: requests go to
// the scheduler and answers come back through each request's channel.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/server_options.h"

namespace kipp::server {

// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kipp::server
