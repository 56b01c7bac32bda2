// For benchmarks whose ranks run as separate processes (under ember-run, or a peer's
// launcher): collect the figures the ranks print, and find a port for a rendezvous.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

/// Runs `command`, returning its "name key value" lines as {name: {key: value}}.
inline std::map<std::string, std::map<int64_t, double>> collect(const std::string& command) {
  std::map<std::string, std::map<int64_t, double>> out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char line[256];
  while (std::fgets(line, sizeof(line), pipe)) {
    char tag[16];
    long long bytes;
    double us;
    if (std::sscanf(line, "%15s %lld %lf", tag, &bytes, &us) == 3) out[tag][bytes] = us;
  }
  int status = ::pclose(pipe);
  if (status != 0) std::fprintf(stderr, "bench: '%s' exited with status %d\n", command.c_str(), status);
  return out;
}

/// A loopback port free when asked (for a peer's rendezvous).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}
