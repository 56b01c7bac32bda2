// The server behind TCPStore: one thread serving every client of a job.
//
// It is hosted by the master rank (PyTorch's TCPStore with is_master) or by ember-run
// for the ranks it launches. The data and the waits are StoreState's
// (tcp_store_state.h), the reading of requests the parser's (tcp_store_parser.h); this
// is the I/O loop between them and the sockets.
//
// Note [No client can stall the store]
// The loop never blocks on a client: sockets are non-blocking, each connection keeps its
// unsent replies in its own buffer, flushed as the client reads. What one client can make
// the server hold is bounded (Limits in tcp_store_protocol.h): a request over the sizes
// is refused with a kClosing reply and the connection closed; a client whose unsent
// replies pass max_pending_output is disconnected; connections past max_connections are
// told so and closed. Replies share the values they carry (Note [Replies share values] in
// tcp_store_state.h), so what queued replies hold of the server's memory is their heads and
// the values the store has since dropped (orphaned); past max_reply_memory, the connections
// holding the most of that are closed, one by one, until it is within the budget again
// (checked after each client's step: it can pass the budget by the one value a step
// orphans). A client that reads its replies holds an orphaned value only while it reads
// it; one that does not read holds it until it is closed. Out of descriptors (EMFILE/ENFILE), the server frees a
// descriptor it keeps in reserve to accept the waiting client and tell it so, rather than leave it in the backlog with
// the listener readable forever; when even that fails it stops polling the listener for a moment, and accepts again
// once descriptors are free.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "distributed/socket.h"
#include "distributed/tcp_store_protocol.h"

namespace ember::distributed {

class TCPStoreServer {
 public:
  /// Serves on every IPv4 and IPv6 address at `port` (0: a free port; IPv4 alone where the
  /// host has no IPv6), or on `bind_host` alone when given (ember-run binds the job's
  /// address: loopback for a one-node job). `run_id`: see Note [Ranks prove their job].
  /// DistributedError when the port is in use.
  explicit TCPStoreServer(int port, const detail::store_protocol::Limits& limits = {},
                          const std::string& bind_host = "", std::string run_id = "");
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const noexcept { return port_; }
  /// Bytes of requests examined by the parser, over the server's life: each byte received
  /// once (Note [Parsing store requests incrementally]).
  uint64_t bytes_parsed() const noexcept { return bytes_parsed_.load(std::memory_order_relaxed); }
  /// What queued replies hold of the server's memory (Note [No client can stall the store]),
  /// as of the end of the loop's last step, and the most it held at the end of a step.
  uint64_t reply_bytes_held() const noexcept { return reply_bytes_held_.load(std::memory_order_relaxed); }
  uint64_t peak_reply_bytes_held() const noexcept { return peak_reply_bytes_held_.load(std::memory_order_relaxed); }
  /// Connections closed because they held the most when the replies passed max_reply_memory.
  uint64_t clients_over_budget() const noexcept { return clients_over_budget_.load(std::memory_order_relaxed); }

 private:
  class Loop;
  void run() noexcept;

  detail::store_protocol::Limits limits_;
  std::string run_id_;
  detail::net::Socket listener_;
  int port_;
  int wake_[2] = {-1, -1};
  int reserve_ = -1;  // a descriptor to free when out of them (Note [No client can stall the store])
  std::atomic<uint64_t> bytes_parsed_{0};
  std::atomic<uint64_t> reply_bytes_held_{0};
  std::atomic<uint64_t> peak_reply_bytes_held_{0};
  std::atomic<uint64_t> clients_over_budget_{0};
  std::thread thread_;
};

}  // namespace ember::distributed
