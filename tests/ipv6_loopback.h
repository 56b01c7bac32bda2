// The IPv6 loopback for the distributed tests: why ::1 cannot be bound on this host ("" when
// it can), and a macro that skips a test with that reason.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ember::testing {

inline std::string ipv6_loopback_unavailable() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return std::string("no IPv6 sockets: ") + std::strerror(errno);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  int error = errno;
  ::close(fd);
  return rc == 0 ? "" : std::string("cannot bind ::1: ") + std::strerror(error);
}

}  // namespace ember::testing

#define SKIP_WITHOUT_IPV6_LOOPBACK()                                                   \
  if (std::string why = ::ember::testing::ipv6_loopback_unavailable(); !why.empty()) { \
    GTEST_SKIP() << "this host has no IPv6 loopback (" << why << ")";                  \
  }
