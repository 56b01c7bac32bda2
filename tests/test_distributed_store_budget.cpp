// Reply amplification against the TCPStore server (issue 34, item 14): clients that ask
// for a large value and never read the reply. Replies share the stored value instead of
// copying it (Note [Replies share values]), and what queued replies hold of the server's
// memory stays within Limits::max_reply_memory, the connections holding the most being
// closed past it (Note [No client can stall the store]). Meanwhile an honest client's
// calls complete (bounded by its generous 10 s timeout; no timing is asserted).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/socket.h"
#include "distributed/tcp_store_protocol.h"
#include "distributed/tcp_store_server.h"
#include "ember/ember.h"

namespace dist = ember::distributed;
namespace net = ember::detail::net;
namespace proto = ember::detail::store_protocol;
using namespace std::chrono_literals;

namespace {

constexpr auto kTimeout = 10s;

/// A client that sends one GET of `key` in ember's protocol and never reads; its receive
/// buffer is small, so that the reply backs up in the server.
net::Socket silent_get(int port, const std::string& key) {
  net::Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int small = 4096;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  std::string get;
  proto::put_u8(get, static_cast<uint8_t>(proto::Command::Get));
  proto::put_string(get, key);
  EXPECT_TRUE(net::send_all(s.fd(), get.data(), get.size()));
  return s;
}

/// The size of a GET request of `key`, as the server's parser counts it.
uint64_t get_bytes(const std::string& key) { return 1 + sizeof(uint32_t) + key.size(); }

/// Waits (bounded) until the server has parsed `bytes` in all: the requests sent are read.
void wait_parsed(const dist::TCPStoreServer& server, uint64_t bytes) {
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (server.bytes_parsed() < bytes) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << server.bytes_parsed() << " of " << bytes << " parsed";
    std::this_thread::yield();
  }
}

/// This process's resident memory, in bytes (VmRSS).
uint64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

/// Reads what the server sends `s` until EOF, a reset or `bytes`; returns how much came.
size_t read_until_closed(const net::Socket& s, size_t bytes) {
  std::vector<char> sink(1 << 20);
  auto deadline = net::Clock::now() + kTimeout;
  size_t got = 0;
  while (got < bytes) {
    pollfd pfd{s.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, net::poll_timeout_ms(deadline)) <= 0) break;
    ssize_t n = ::recv(s.fd(), sink.data(), std::min(sink.size(), bytes - got), 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

TEST(TCPStoreBudget, GetsOfALargeValueThatAreNeverReadCostNoCopies) {
  constexpr size_t kValue = 32u << 20;
  constexpr int kSilent = 8;
  dist::TCPStoreServer server(0);
  dist::TCPStore honest("127.0.0.1", server.port(), std::nullopt, false, kTimeout);
  honest.set("big", std::string(kValue, 'x'));
  EXPECT_EQ(honest.get("big").size(), kValue);
  honest.set("small", "1");
  const uint64_t parsed = server.bytes_parsed();
  const uint64_t resident = resident_bytes();
  std::vector<net::Socket> silent;
  for (int i = 0; i < kSilent; ++i) silent.push_back(silent_get(server.port(), "big"));
  wait_parsed(server, parsed + kSilent * get_bytes("big"));
  // Every GET is answered from the one stored buffer: the replies hold their heads alone
  // (before, each held a copy: eight GETs of 32 MiB, 256 MiB more resident).
  honest.set("small", "2");  // a round trip: the loop has ended the step that read the GETs
  EXPECT_LT(server.reply_bytes_held(), 1024u);
  EXPECT_LT(resident_bytes(), resident + 2 * kValue);
  // The honest client is served while they wait: small calls and the large value itself.
  EXPECT_EQ(honest.get("small"), "2");
  EXPECT_EQ(honest.add("n", 3), 3);
  EXPECT_EQ(honest.get("big").size(), kValue);
  EXPECT_EQ(server.clients_over_budget(), 0u);
}

TEST(TCPStoreBudget, RepliesHoldingDroppedValuesStayWithinTheBudget) {
  // Each silent client GETs the current value of "key", which the honest client then
  // replaces: the old value lives on for the silent client's reply alone (orphaned).
  constexpr size_t kValue = 16u << 20;
  constexpr int kSilent = 8;
  proto::Limits limits;
  limits.max_reply_memory = 2 * kValue + kValue / 2;  // room for two orphaned values, not three
  dist::TCPStoreServer server(0, limits);
  dist::TCPStore honest("127.0.0.1", server.port(), std::nullopt, false, kTimeout);
  std::vector<net::Socket> silent;
  for (int i = 0; i < kSilent; ++i) {
    honest.set("key", std::string(kValue, static_cast<char>('a' + i)));
    uint64_t parsed = server.bytes_parsed();
    silent.push_back(silent_get(server.port(), "key"));
    wait_parsed(server, parsed + get_bytes("key"));
  }
  honest.set("key", "small");  // orphans the last one's value too
  EXPECT_EQ(honest.get("key"), "small");
  // Two orphaned values fit; each one more closed the client holding the most.
  EXPECT_LE(server.peak_reply_bytes_held(), limits.max_reply_memory);
  EXPECT_GE(server.peak_reply_bytes_held(), 2 * kValue);
  EXPECT_LE(server.reply_bytes_held(), limits.max_reply_memory);
  EXPECT_EQ(server.clients_over_budget(), static_cast<uint64_t>(kSilent - 2));
  // The clients closed got part of their reply at most; the others get all of it.
  const size_t reply = 2 + sizeof(uint32_t) + kValue;
  int closed = 0;
  for (const auto& s : silent) closed += read_until_closed(s, reply) < reply ? 1 : 0;
  EXPECT_EQ(closed, kSilent - 2);
  // The honest client still works, and large values still pass.
  honest.set("key", std::string(kValue, 'z'));
  EXPECT_EQ(honest.get("key"), std::string(kValue, 'z'));
  EXPECT_EQ(honest.num_keys(), 1);
}
