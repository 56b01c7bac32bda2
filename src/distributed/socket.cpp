#include "distributed/socket.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "ember/errors.h"

namespace ember::detail::net {
namespace {

std::string errno_text(int error) { return cat(std::strerror(error), " (errno ", error, ")"); }

/// One address of a host, as getaddrinfo gives it (IPv4 or IPv6).
struct Endpoint {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family() const noexcept { return address.ss_family; }
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&address); }
};

int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

/// The numeric text of an address; a scoped (link-local) IPv6 address keeps its interface
/// ("fe80::1%eth0") so that it can be bound and resolved again.
std::string address_text(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      ::inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], text, sizeof(text));
      return text;
    }
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    std::string out = text;
    char interface[IF_NAMESIZE] = {};
    if (in6.sin6_scope_id != 0 && ::if_indextoname(in6.sin6_scope_id, interface)) out += cat("%", interface);
    return out;
  }
  ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  return text;
}

/// Every address of `host` at `port`, in the resolver's order (RFC 6724 via gai.conf), in
/// `endpoints`; getaddrinfo's code on failure (EAI_NODATA-like "no IPv4 or IPv6 address" is
/// EAI_FAMILY), so the caller decides which failures are worth retrying.
int try_resolve(const std::string& host, int port, std::vector<Endpoint>& endpoints) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  std::string service = std::to_string(port);
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return rc;
  endpoints.clear();
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Endpoint e;
    std::memcpy(&e.address, a->ai_addr, a->ai_addrlen);
    e.length = a->ai_addrlen;
    endpoints.push_back(e);
  }
  ::freeaddrinfo(found);
  return endpoints.empty() ? EAI_FAMILY : 0;
}

[[noreturn]] void fail_to_resolve(const std::string& host, int rc) {
  if (rc == EAI_FAMILY)
    fail<DistributedError>("Failed to resolve the address '", host, "': it has no IPv4 or IPv6 address");
  fail<DistributedError>("Failed to resolve the address '", host, "': ", ::gai_strerror(rc));
}

void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// Binds `socket` to every address of `family` at `port` and listens; false with errno set.
bool bind_and_listen(const Socket& socket, int family, int port) {
  int one = 1, zero = 0;
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage address{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    // Dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d (the default is the net.ipv6.bindv6only sysctl).
    if (::setsockopt(socket.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0) return false;
    auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_any;
    in6.sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in6);
  } else {
    auto& in = reinterpret_cast<sockaddr_in&>(address);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_ANY);
    in.sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in);
  }
  return ::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0 && ::listen(socket.fd(), 128) == 0;
}

/// One non-blocking connect to `endpoint`, waiting until `deadline`; an invalid socket
/// with `error` set when it fails (EAFNOSUPPORT: the host lacks the address's family).
Socket try_connect(const Endpoint& endpoint, Clock::time_point deadline, int& error) {
  Socket socket(::socket(endpoint.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket.valid()) {
    // A host without IPv6 cannot create the socket for an IPv6 address: try the next one.
    error = errno;
    EMBER_CHECK(error == EAFNOSUPPORT, DistributedError, "The client socket could not be created: ", errno_text(error));
    return socket;
  }
  int rc = ::connect(socket.fd(), endpoint.get(), endpoint.length);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{socket.fd(), POLLOUT, 0};
    rc = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (rc == 1) {
      int so_error = 0;
      socklen_t length = sizeof(so_error);
      ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &so_error, &length);
      rc = so_error == 0 ? 0 : -1;
      errno = so_error;
    } else {
      rc = -1;
      errno = ETIMEDOUT;
    }
  }
  if (rc != 0) {
    error = errno;
    socket.close();
    return socket;
  }
  int flags = 0;  // back to blocking; reads and writes poll with deadlines themselves
  ::ioctl(socket.fd(), FIONBIO, &flags);
  set_no_delay(socket.fd());
  return socket;
}

}  // namespace

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int poll_timeout_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000 ? 1'000'000 : static_cast<int>(left);
}

Socket listen_on(int port) {
  // Dual-stack first, then IPv4 alone where the host has no IPv6 (the family is not
  // supported, or IPv6 is disabled and [::] cannot be bound). A port in use is in use for both.
  Socket socket(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (socket.valid()) {
    if (bind_and_listen(socket, AF_INET6, port)) return socket;
    if (errno == EADDRINUSE) {
      fail<DistributedError>("The server socket has failed to listen on port ", port, ": ", errno_text(EADDRINUSE),
                             "; is another process (or an earlier run) using the port?");
    }
  }
  socket = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EMBER_CHECK(socket.valid(), DistributedError, "The server socket could not be created: ", errno_text(errno));
  if (!bind_and_listen(socket, AF_INET, port)) {
    int error = errno;
    fail<DistributedError>("The server socket has failed to listen on port ", port, ": ", errno_text(error),
                           error == EADDRINUSE ? "; is another process (or an earlier run) using the port?" : "");
  }
  return socket;
}

Socket listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  EMBER_CHECK(rc == 0, DistributedError, "The server socket cannot bind '", host, "': ", ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(found, ::freeaddrinfo);
  int error = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!socket.valid()) continue;
    int one = 1;
    ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage address{};
    std::memcpy(&address, a->ai_addr, a->ai_addrlen);
    if (a->ai_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6&>(address).sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      reinterpret_cast<sockaddr_in&>(address).sin_port = htons(static_cast<uint16_t>(port));
    }
    if (::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), a->ai_addrlen) == 0 &&
        ::listen(socket.fd(), 128) == 0) {
      return socket;
    }
    error = errno;
  }
  fail<DistributedError>("The server socket has failed to listen on port ", port, " of ", host, ": ", errno_text(error),
                         error == EADDRINUSE ? "; is another process (or an earlier run) using the port?" : "");
}

int local_port(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  return port_of(address);
}

std::string local_address(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  return address_text(address);
}

std::string bind_error(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) return cat("it does not resolve: ", ::gai_strerror(rc));
  int error = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (socket.valid() && ::bind(socket.fd(), a->ai_addr, a->ai_addrlen) == 0) {
      error = 0;
      break;
    }
    error = errno;
  }
  ::freeaddrinfo(found);
  return error == 0 ? "" : errno_text(error);
}

std::string host_port(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? cat("[", host, "]:", port) : cat(host, ":", port);
}

// Note [Transient resolver failures]
// A name the resolver cannot answer for now (EAI_AGAIN: a DNS server slow or restarting
// while a job starts) is retried with the connection attempts until the deadline, as
// PyTorch's SocketConnectOp retries; a name that does not exist (EAI_NONAME) or any other
// answer is final at once, so a misspelled MASTER_ADDR does not wait out the timeout.
Socket connect_to(const std::string& host, int port, Clock::time_point deadline) {
  EMBER_CHECK(port > 0 && port < 65536, DistributedError, "Invalid port ", port, " for ", host);
  std::vector<Endpoint> endpoints;
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(1);
  int last_error = 0;
  int resolver_error = 0;
  do {
    if (endpoints.empty()) {
      resolver_error = try_resolve(host, port, endpoints);
      if (resolver_error != 0 && resolver_error != EAI_AGAIN) fail_to_resolve(host, resolver_error);
    }
    bool created = endpoints.empty();  // nothing tried yet: the resolver asked to retry
    for (size_t i = 0; i < endpoints.size(); ++i) {
      // An address that never answers leaves the ones after it a share of the time left.
      auto now = Clock::now();
      auto attempt_deadline = now + (deadline - now) / static_cast<int>(endpoints.size() - i);
      Socket socket = try_connect(endpoints[i], attempt_deadline, last_error);
      if (socket.valid()) return socket;
      created = created || last_error != EAFNOSUPPORT;
    }
    EMBER_CHECK(created, DistributedError, "The client socket could not be created for any address of ", host, ": ",
                errno_text(last_error));
    // The server may not listen yet (refused) or be slow to accept: retry until the deadline.
    std::this_thread::sleep_for(std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      deadline - Clock::now() + std::chrono::milliseconds(1))));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  } while (Clock::now() < deadline);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (endpoints.empty()) {
    fail<DistributedError>("The client socket has timed out after ", waited, "ms while trying to resolve '", host,
                           "': ", ::gai_strerror(resolver_error));
  }
  std::string tried;
  for (const auto& e : endpoints) tried += cat(tried.empty() ? "" : ", ", host_port(address_text(e.address), port));
  fail<DistributedError>("The client socket has timed out after ", waited, "ms while trying to connect to (", host,
                         ", ", port, "): ", errno_text(last_error), " (tried ", tried, ")");
}

bool send_all(int fd, const void* data, size_t bytes) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) fail<DistributedError>("Socket Timeout: no reply from the store within the timeout");
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace ember::detail::net
