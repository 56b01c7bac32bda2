// Blocking TCP sockets with deadlines, for the store and the launcher.
//
// Every call that can block takes a deadline and throws DistributedError when it passes,
// so that nothing in ember::distributed waits forever on a peer. File descriptors are
// owned by Socket (RAII, move-only, close on destruction). IPv4 and IPv6: the server
// listens dual-stack where the host has IPv6, clients try every address a host resolves to.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ember::detail::net {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) noexcept : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = other.release();
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close() noexcept;

 private:
  int fd_ = -1;
};

/// A socket listening on every address at `port` (0: the kernel picks one): an IPv6
/// socket that also accepts IPv4 clients, or an IPv4 one where the host has no IPv6.
/// DistributedError naming the port and errno when it is in use.
Socket listen_on(int port);
/// A socket listening on the first address of `host` that can be bound at `port` (a
/// one-node job's 127.0.0.1 binds loopback alone). DistributedError when none can.
Socket listen_on(const std::string& host, int port);
/// The port a bound socket listens on.
int local_port(const Socket& socket);
/// The local IP address of a connected socket ("127.0.0.1", "10.0.0.2", "::1",
/// "fe80::1%eth0"); an IPv4 address reached over IPv6 (::ffff:a.b.c.d) reads as IPv4.
std::string local_address(const Socket& socket);

/// Why no address of `host` can be bound on this machine ("" when one can), e.g.
/// "Cannot assign requested address (errno 99)" for another host's address.
std::string bind_error(const std::string& host);

/// "host:port", with the host in brackets when it is an IPv6 address ("[::1]:29500").
std::string host_port(const std::string& host, int port);

/// Connects to host:port, trying the host's addresses (IPv4 and IPv6) in the resolver's
/// order and retrying refused connections until `deadline` (the server may not be up
/// yet). DistributedError when the host does not resolve or the deadline passes.
Socket connect_to(const std::string& host, int port, Clock::time_point deadline);

/// Sends all `bytes` (never raises SIGPIPE). False when the peer is gone.
bool send_all(int fd, const void* data, size_t bytes);
/// Receives exactly `bytes`; false when the peer closed, DistributedError on timeout.
bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline);

/// Milliseconds left until `deadline` (0 when passed), for poll().
int poll_timeout_ms(Clock::time_point deadline);

}  // namespace ember::detail::net
