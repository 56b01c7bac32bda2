#include "distributed/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "ember/errors.h"

namespace ember::detail::net {
namespace {

std::string errno_text(int error) { return cat(std::strerror(error), " (errno ", error, ")"); }

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    fail<DistributedError>("Failed to resolve the address '", host, "': ", ::gai_strerror(rc));
  }
  sockaddr_in address = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EMBER_CHECK(socket.valid(), DistributedError, "The server socket could not be created: ", errno_text(errno));
  int one = 1;
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(socket.fd(), 128) != 0) {
    int error = errno;
    fail<DistributedError>("The server socket has failed to listen on port ", port, ": ", errno_text(error),
                           error == EADDRINUSE ? "; is another process (or an earlier run) using the port?" : "");
  }
  return socket;
}

int local_port(const Socket& socket) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

std::string local_address(const Socket& socket) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return text;
}

Socket connect_to(const std::string& host, int port, Clock::time_point deadline) {
  EMBER_CHECK(port > 0 && port < 65536, DistributedError, "Invalid port ", port, " for ", host);
  sockaddr_in address = resolve(host, port);
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(1);
  int last_error = 0;
  do {
    Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    EMBER_CHECK(socket.valid(), DistributedError, "The client socket could not be created: ", errno_text(errno));
    int rc = ::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{socket.fd(), POLLOUT, 0};
      rc = ::poll(&pfd, 1, poll_timeout_ms(deadline));
      if (rc == 1) {
        int error = 0;
        socklen_t length = sizeof(error);
        ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
        rc = error == 0 ? 0 : -1;
        errno = error;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = 0;  // back to blocking; reads and writes poll with deadlines themselves
      ::ioctl(socket.fd(), FIONBIO, &flags);
      set_no_delay(socket.fd());
      return socket;
    }
    last_error = errno;
    // The server may not listen yet (refused) or be slow to accept: retry until the deadline.
    std::this_thread::sleep_for(std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      deadline - Clock::now() + std::chrono::milliseconds(1))));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  } while (Clock::now() < deadline);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  fail<DistributedError>("The client socket has timed out after ", waited, "ms while trying to connect to (", host,
                         ", ", port, "): ", errno_text(last_error));
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
