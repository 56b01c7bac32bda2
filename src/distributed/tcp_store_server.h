// The server behind TCPStore: one thread serving every client of a job.
//
// It is hosted by the master rank (PyTorch's TCPStore with is_master) or by ember-run
// for the ranks it launches. Besides the key-value operations it keeps the ranks whose
// connection closed without leaving, in order: a process that dies closes its sockets,
// so survivors of a collective can learn which peer is gone (TCPStore::departed_ranks).
#pragma once

#include <memory>
#include <thread>

#include "distributed/socket.h"

namespace ember::distributed {

class TCPStoreServer {
 public:
  /// Serves on every IPv4 and IPv6 address at `port` (0: a free port; IPv4 alone where the
  /// host has no IPv6). DistributedError when the port is in use.
  explicit TCPStoreServer(int port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const noexcept { return port_; }

 private:
  struct State;
  void run() noexcept;

  detail::net::Socket listener_;
  int port_;
  int wake_[2] = {-1, -1};
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace ember::distributed
