// Notices a client that has gone away while its request is generating. cpp-httplib does not hand
// the connection's socket to handlers, so the probe finds it among the process's descriptors by
// the connection's two addresses (which httplib does give); the socket stays open until the
// handler returns, so the descriptor cannot be reused under the probe meanwhile.
#pragma once

#include <string>

namespace kipp::server {

class ConnectionProbe {
 public:
  // A probe that never reports a close when the socket is not found (writes still fail then).
  static ConnectionProbe find(const std::string& local_addr, int local_port, const std::string& remote_addr,
                              int remote_port);
  // The peer closed or reset the connection (data it pipelined meanwhile does not count).
  bool peer_closed() const;
  bool found() const { return fd_ >= 0; }
  // Shuts the connection down both ways (what was written is still delivered): the server's
  // next read of it fails, so the connection closes instead of serving another request.
  void shutdown() const;

 private:
  int fd_ = -1;
};

}  // namespace kipp::server
