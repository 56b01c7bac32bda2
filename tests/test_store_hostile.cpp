// The TCPStore server against clients that do not play by its rules (issue 28): a slow
// reader, pipelined requests never read, huge announced lengths, messages trickled a
// byte at a time, descriptor exhaustion, foreign protocols, an unknown command, too many
// connections. In each, two honest clients keep working with a generous 10 s timeout
// (the bound; no timing is asserted otherwise), and the hostile one gets a clear error or
// is disconnected. Also the client's side: no reply read for the wrong request after a
// timeout, huge timeouts, and ADD's refusals. The store's own hostile clients speak the
// wire format of tcp_store_protocol.h over raw sockets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/deadline.h"
#include "distributed/socket.h"
#include "distributed/tcp_store_protocol.h"
#include "distributed/tcp_store_server.h"
#include "ember/ember.h"
#include "test_support.h"

namespace dist = ember::distributed;
namespace net = ember::detail::net;
namespace proto = ember::detail::store_protocol;
using ember::testing::error_of;
using namespace std::chrono_literals;

namespace {

constexpr auto kHonestTimeout = 10s;

/// A client that writes raw bytes: blocking sends, reads under a 10 s deadline.
class RawClient {
 public:
  /// `receive_buffer`: a small SO_RCVBUF set before connecting, so that replies back up soon.
  explicit RawClient(int port, int receive_buffer = 0) : socket_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (receive_buffer > 0) {
      ::setsockopt(socket_.fd(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = ::connect(socket_.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  bool connected() const { return connected_; }
  int fd() const { return socket_.fd(); }
  void send(const std::string& bytes) { ASSERT_TRUE(net::send_all(fd(), bytes.data(), bytes.size())); }
  /// Reads `bytes` exactly; false on EOF, a reset or the deadline.
  bool read(void* out, size_t bytes) {
    try {
      return net::recv_all(fd(), out, bytes, net::Clock::now() + kHonestTimeout);
    } catch (const ember::DistributedError&) {
      return false;
    }
  }
  /// Reads a kError or kClosing reply and returns its message ("<no error reply>" otherwise).
  std::string error_reply() {
    uint8_t status = 0;
    uint32_t n = 0;
    if (!read(&status, 1) || status == static_cast<uint8_t>(proto::Status::kOk) || !read(&n, sizeof(n)) ||
        n > (1u << 16)) {
      return "<no error reply>";
    }
    std::string message(n, '\0');
    return read(message.data(), n) ? message : "<no error reply>";
  }
  /// True when the server closes the connection within the deadline (EOF or a reset).
  bool closed_by_server() {
    char sink[65536];
    auto deadline = net::Clock::now() + kHonestTimeout;
    for (;;) {
      pollfd pfd{fd(), POLLIN, 0};
      if (::poll(&pfd, 1, net::poll_timeout_ms(deadline)) <= 0) return false;
      ssize_t n = ::recv(fd(), sink, sizeof(sink), 0);
      if (n <= 0) return true;
    }
  }

 private:
  net::Socket socket_;
  bool connected_ = false;
};

std::string request(proto::Command command) {
  std::string out;
  proto::put_u8(out, static_cast<uint8_t>(command));
  return out;
}
std::string get_request(const std::string& key) {
  std::string out = request(proto::Command::Get);
  proto::put_string(out, key);
  return out;
}
std::string keys_request(proto::Command command, const std::vector<std::string>& keys, int64_t timeout_ms = 0) {
  std::string out = request(command);
  if (command == proto::Command::Wait) proto::put_i64(out, timeout_ms);
  proto::put_i64(out, static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) proto::put_string(out, k);
  return out;
}

/// Two honest ranks' worth of calls, each bounded by the clients' 10 s timeout.
void expect_honest_clients_work(dist::TCPStore& a, dist::TCPStore& b, const std::string& tag) {
  for (int i = 0; i < 3; ++i) {
    std::string key = tag + "/" + std::to_string(i);
    a.set(key, "value " + std::to_string(i));
    EXPECT_EQ(b.get(key), "value " + std::to_string(i));
    EXPECT_EQ(b.add(tag + "/counter", 2), 2 * (i + 1));
    EXPECT_TRUE(a.check({key}));
    b.wait({key}, kHonestTimeout);
  }
}

struct HonestPair {
  explicit HonestPair(int port)
      : a("127.0.0.1", port, std::nullopt, false, kHonestTimeout),
        b("127.0.0.1", port, std::nullopt, false, kHonestTimeout) {}
  dist::TCPStore a, b;
};

}  // namespace

// ---- item 1: replies never block the server --------------------------------------------

TEST(TCPStoreHostile, AReaderThatNeverReadsABigValueStallsNoOne) {
  dist::TCPStoreServer server(0);
  HonestPair honest(server.port());
  honest.a.set("big", std::string(16u << 20, 'x'));  // far more than the kernel buffers hold
  RawClient slow(server.port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(slow.connected());
  slow.send(get_request("big"));
  expect_honest_clients_work(honest.a, honest.b, "slow-big");
  dist::TCPStore late("127.0.0.1", server.port(), std::nullopt, false, kHonestTimeout);
  EXPECT_EQ(late.get("slow-big/0"), "value 0");
}

TEST(TCPStoreHostile, PipelinedRequestsNeverReadDisconnectTheirClient) {
  dist::TCPStoreServer server(0);
  HonestPair honest(server.port());
  honest.a.set("small", std::string(1024, 's'));
  RawClient pipeliner(server.port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(pipeliner.connected());
  ::fcntl(pipeliner.fd(), F_SETFL, O_NONBLOCK);
  // Write GETs without reading until the server drops the connection, or 10 s pass with
  // nothing more accepted (the server no longer reads: the failure this test exists for).
  std::string batch;
  for (int i = 0; i < 1024; ++i) batch += get_request("small");
  bool disconnected = false;
  auto deadline = net::Clock::now() + kHonestTimeout;
  while (!disconnected) {
    ssize_t n = ::send(pipeliner.fd(), batch.data(), batch.size(), MSG_NOSIGNAL);
    if (n >= 0) continue;  // a partial batch leaves the server a torn request: it waits for the rest
    if (errno == EPIPE || errno == ECONNRESET) {
      disconnected = true;
    } else {
      pollfd pfd{pipeliner.fd(), POLLOUT, 0};
      if (::poll(&pfd, 1, net::poll_timeout_ms(deadline)) <= 0) break;
      if (pfd.revents & (POLLERR | POLLHUP)) disconnected = true;
    }
  }
  EXPECT_TRUE(disconnected) << "the server neither read nor dropped a client that does not read its replies";
  expect_honest_clients_work(honest.a, honest.b, "pipelined");
}

// ---- item 2: bounded sizes, refused with a clear error to that client alone ---------------

TEST(TCPStoreHostile, HugeAnnouncedLengthsAreRefusedToThatClientAlone) {
  dist::TCPStoreServer server(0);
  HonestPair honest(server.port());
  struct Case {
    std::string header;
    std::string message;
  };
  std::vector<Case> cases;
  {
    std::string set_huge_key = request(proto::Command::Set);
    uint32_t four_gib = std::numeric_limits<uint32_t>::max();
    set_huge_key.append(reinterpret_cast<const char*>(&four_gib), sizeof(four_gib));
    cases.push_back({set_huge_key, "a key of 4294967295 bytes exceeds the store's limit of 1048576 bytes"});
    std::string set_huge_value = request(proto::Command::Set);
    proto::put_string(set_huge_value, "k");
    set_huge_value.append(reinterpret_cast<const char*>(&four_gib), sizeof(four_gib));
    cases.push_back({set_huge_value, "a value of 4294967295 bytes exceeds the store's limit of 268435456 bytes"});
    std::string check_many = request(proto::Command::Check);
    proto::put_i64(check_many, int64_t{1} << 40);
    cases.push_back({check_many, "a request for 1099511627776 keys exceeds the store's limit"});
    std::string wait_negative = request(proto::Command::Wait);
    proto::put_i64(wait_negative, 1000);
    proto::put_i64(wait_negative, -1);
    cases.push_back({wait_negative, "a request for -1 keys exceeds the store's limit"});
  }
  for (const auto& c : cases) {
    RawClient hostile(server.port());
    ASSERT_TRUE(hostile.connected());
    hostile.send(c.header + std::string(1u << 20, 'z'));  // and then the start of what it announced
    EXPECT_NE(hostile.error_reply().find(c.message), std::string::npos) << c.message;
    EXPECT_TRUE(hostile.closed_by_server());
    expect_honest_clients_work(honest.a, honest.b, "huge-" + std::to_string(&c - cases.data()));
  }
}

TEST(TCPStoreHostile, TheClientRefusesAKeyTheServerWouldRefuse) {
  dist::TCPStore master("127.0.0.1", 0, std::nullopt, true, kHonestTimeout);
  std::string message = error_of<ember::ValueError>([&] { master.set(std::string((1u << 20) + 1, 'k'), "v"); });
  EXPECT_NE(message.find("a key of 1048577 bytes exceeds the store's limit of 1048576 bytes"), std::string::npos)
      << message;
  master.set("after", "ok");
  EXPECT_EQ(master.get("after"), "ok");
}

TEST(TCPStoreHostile, ConnectionsPastTheLimitAreToldSoAndClosed) {
  proto::Limits limits;
  limits.max_connections = 3;
  dist::TCPStoreServer server(0, limits);
  HonestPair honest(server.port());
  expect_honest_clients_work(honest.a, honest.b, "limit-before");  // both are accepted
  auto third = std::make_unique<RawClient>(server.port());
  third->send(request(proto::Command::NumKeys));
  uint8_t status = 1;
  ASSERT_TRUE(third->read(&status, 1));
  EXPECT_EQ(status, 0);
  RawClient fourth(server.port());
  EXPECT_EQ(fourth.error_reply(), "TCPStore: the store serves at most 3 connections at once");
  EXPECT_TRUE(fourth.closed_by_server());
  dist::TCPStore fifth("127.0.0.1", server.port(), std::nullopt, false, kHonestTimeout);
  EXPECT_EQ(error_of<ember::DistributedError>([&] { fifth.num_keys(); }),
            "TCPStore: the store serves at most 3 connections at once");
  expect_honest_clients_work(honest.a, honest.b, "limit-after");
  third.reset();        // a place is free again: the refused client connects again and is served
  honest.a.num_keys();  // a round trip: the server has seen the close, sent before it
  EXPECT_EQ(fifth.get("limit-after/0"), "value 0");
}

// ---- item 3: a request trickled in is parsed once ------------------------------------------

TEST(TCPStoreHostile, ACheckTrickledInIsParsedOnce) {
  dist::TCPStoreServer server(0);
  RawClient trickler(server.port());  // connected first: its chunk is read before the honest call's
  dist::TCPStore honest("127.0.0.1", server.port(), std::nullopt, false, kHonestTimeout);
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back("key" + std::to_string(10000 + i));
  std::string check = keys_request(proto::Command::Check, keys);
  uint64_t sent = 1;  // the honest client's probe: NUM_KEYS (Note [Which store the client talks to])
  for (size_t pos = 0; pos < check.size(); pos += 97) {
    trickler.send(check.substr(pos, 97));
    EXPECT_EQ(honest.num_keys(), 0);  // one byte each: NUM_KEYS
    sent += 1;
  }
  sent += check.size();
  char reply[2] = {1, 1};
  ASSERT_TRUE(trickler.read(reply, 2));
  EXPECT_EQ(reply[0], 0);  // kOk
  EXPECT_EQ(reply[1], 0);  // not all set
  // Every byte examined once; re-parsing from the first byte would count the ~250 chunks
  // again and again (about 250 x 12 KB).
  EXPECT_EQ(server.bytes_parsed(), sent);
}

TEST(TCPStoreHostile, ASetTrickledByteByByteIsAppliedWhileOthersWork) {
  dist::TCPStoreServer server(0);
  RawClient trickler(server.port());
  HonestPair honest(server.port());
  std::string set = request(proto::Command::Set);
  proto::put_string(set, "trickled");
  proto::put_string(set, "whole");
  for (size_t i = 0; i < set.size(); ++i) {
    trickler.send(set.substr(i, 1));
    if (i + 1 < set.size()) {
      EXPECT_FALSE(honest.a.check({"trickled"}));
    }
    if (i % 8 == 0) expect_honest_clients_work(honest.a, honest.b, "trickle-" + std::to_string(i));
  }
  uint8_t status = 1;
  ASSERT_TRUE(trickler.read(&status, 1));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(honest.b.get("trickled"), "whole");
}

// ---- item 4: out of descriptors ---------------------------------------------------------------

namespace {

/// Lowers this process's descriptor limit and fills it, restoring both when destroyed.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::close(probe);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, static_cast<rlim_t>(probe) + 64);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
    for (;;) {
      int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers_.push_back(fd);
    }
  }
  ~DescriptorsExhausted() { restore(); }
  /// Frees one descriptor for the caller's next socket.
  void free_one() {
    ::close(fillers_.back());
    fillers_.pop_back();
  }
  void restore() {
    for (int fd : fillers_) ::close(fd);
    fillers_.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<int> fillers_;
};

}  // namespace

TEST(TCPStoreHostile, OutOfDescriptorsAClientIsToldSoAndTheServerRecovers) {
  dist::TCPStoreServer server(0);
  HonestPair honest(server.port());
  expect_honest_clients_work(honest.a, honest.b, "accepted");  // both hold their descriptors
  {
    DescriptorsExhausted exhausted;
    exhausted.free_one();  // for the refused clients, one at a time
    for (int attempt = 0; attempt < 2; ++attempt) {
      RawClient refused(server.port());  // in the backlog: the server has no descriptor for it
      ASSERT_TRUE(refused.connected());
      EXPECT_NE(refused.error_reply().find("out of file descriptors"), std::string::npos);
      expect_honest_clients_work(honest.a, honest.b, "exhausted-" + std::to_string(attempt));
    }
  }
  // Descriptors are free again: new clients are served.
  dist::TCPStore late("127.0.0.1", server.port(), std::nullopt, false, kHonestTimeout);
  EXPECT_EQ(late.get("exhausted-1/0"), "value 0");
  expect_honest_clients_work(honest.a, late, "recovered");
}

// ---- item 6: foreign protocols and unknown commands ------------------------------------------

TEST(TCPStoreHostile, ForeignProtocolsAndUnknownCommandsAreClosedWithAnError) {
  dist::TCPStoreServer server(0);
  HonestPair honest(server.port());
  std::vector<std::string> foreign = {
      "GET / HTTP/1.1\r\nHost: store\r\n\r\n",             // HTTP: 'G' is no command
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01", 8),  // a TLS ClientHello
      std::string("\xff", 1),                              // an unknown command byte
  };
  for (const auto& bytes : foreign) {
    RawClient hostile(server.port());
    hostile.send(bytes);
    std::string message = hostile.error_reply();
    EXPECT_NE(message.find("TCPStore: unknown command byte"), std::string::npos) << message;
    EXPECT_TRUE(hostile.closed_by_server());
    expect_honest_clients_work(honest.a, honest.b, "foreign-" + std::to_string(static_cast<uint8_t>(bytes[0])));
  }
}

// ---- item 5: a timed-out call never reads another call's reply ------------------------------------

namespace {

/// A store that answers when the test says so: accepts, reads one request, replies.
struct ScriptedServer {
  ScriptedServer() : listener(net::listen_on(0)), port(net::local_port(listener)) {}
  /// The next connection, within 10 s (invalid otherwise).
  net::Socket accept() {
    pollfd pfd{listener.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, 10'000) != 1) return {};
    return net::Socket(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  static std::string read(const net::Socket& s, size_t bytes) {
    std::string out(bytes, '\0');
    try {
      if (!net::recv_all(s.fd(), out.data(), bytes, net::Clock::now() + 10s)) return "<closed>";
    } catch (const ember::DistributedError&) {
      return "<timeout>";
    }
    return out;
  }
  static void reply_i64(const net::Socket& s, int64_t value) {
    std::string out;
    proto::put_status(out, proto::Status::kOk);
    proto::put_i64(out, value);
    net::send_all(s.fd(), out.data(), out.size());
  }
  net::Socket listener;
  int port;
};

std::string add_request(const std::string& key, int64_t amount) {
  std::string out = request(proto::Command::Add);
  proto::put_string(out, key);
  proto::put_i64(out, amount);
  return out;
}

}  // namespace

/// A client of `server` whose probe (Note [Which store the client talks to]) `first` answers
/// as ember's server does.
std::unique_ptr<dist::TCPStore> probed_client(ScriptedServer& server, std::chrono::milliseconds timeout,
                                              net::Socket& first) {
  std::thread answer([&] {
    first = server.accept();
    std::string probe = request(proto::Command::NumKeys);
    if (ScriptedServer::read(first, probe.size()) != probe) return;
    std::string ok;
    proto::put_status(ok, proto::Status::kOk);
    proto::put_i64(ok, 0);
    net::send_all(first.fd(), ok.data(), ok.size());
  });
  auto client = std::make_unique<dist::TCPStore>("127.0.0.1", server.port, std::nullopt, false, timeout);
  answer.join();
  return client;
}

TEST(TCPStoreClient, AReplyThatComesAfterATimeoutIsNeverReadAsTheNextOne) {
  ScriptedServer server;
  net::Socket first;
  auto probed = probed_client(server, 300ms, first);
  dist::TCPStore& client = *probed;
  ASSERT_TRUE(first.valid());
  // The first add is read and not answered in time.
  std::string message = error_of<ember::DistributedError>([&] { client.add("counter", 1); });
  EXPECT_NE(message.find("Socket Timeout"), std::string::npos) << message;
  EXPECT_EQ(ScriptedServer::read(first, add_request("counter", 1).size()), add_request("counter", 1));
  ScriptedServer::reply_i64(first, 3);  // its late reply: the counter was 3 then
  std::thread store([&] {
    net::Socket second = server.accept();
    if (!second.valid()) return;
    if (ScriptedServer::read(second, add_request("counter", 10).size()) == add_request("counter", 10)) {
      ScriptedServer::reply_i64(second, 13);
    }
  });
  int64_t value = -1;
  try {
    value = client.add("counter", 10);
  } catch (const ember::DistributedError& e) {
    ADD_FAILURE() << e.what();
  }
  store.join();
  EXPECT_EQ(value, 13);
}

TEST(TCPStoreClient, ARankThatTimesOutLeavesItsOldConnectionAndRegistersOnTheNew) {
  ScriptedServer server;
  net::Socket first;
  auto probed = probed_client(server, 300ms, first);
  dist::TCPStore& client = *probed;
  ASSERT_TRUE(first.valid());
  std::string register_rank = request(proto::Command::Register);
  proto::put_i64(register_rank, 1);
  proto::put_string(register_rank, std::getenv("TORCHELASTIC_RUN_ID") ? std::getenv("TORCHELASTIC_RUN_ID") : "");
  std::thread answer([&] {
    if (ScriptedServer::read(first, register_rank.size()) != register_rank) return;
    std::string ok;
    proto::put_status(ok, proto::Status::kOk);
    net::send_all(first.fd(), ok.data(), ok.size());
  });
  client.register_rank(1);
  answer.join();
  EXPECT_NE(error_of<ember::DistributedError>([&] { client.check({"k"}); }).find("Socket Timeout"), std::string::npos);
  // The abandoned connection says LEAVE after its request, so closing it is no departure.
  std::string check = keys_request(proto::Command::Check, {"k"});
  EXPECT_EQ(ScriptedServer::read(first, check.size() + 1), check + request(proto::Command::Leave));
  std::thread store([&] {
    net::Socket second = server.accept();
    if (!second.valid()) return;
    if (ScriptedServer::read(second, register_rank.size()) != register_rank) return;
    std::string ok;
    proto::put_status(ok, proto::Status::kOk);
    net::send_all(second.fd(), ok.data(), ok.size());
    if (ScriptedServer::read(second, check.size()) != check) return;
    std::string not_all_set(2, '\0');  // kOk, false
    net::send_all(second.fd(), not_all_set.data(), not_all_set.size());
  });
  bool found = true;
  try {
    found = client.check({"k"});
  } catch (const ember::DistributedError& e) {
    ADD_FAILURE() << e.what();
  }
  store.join();
  EXPECT_FALSE(found);
}

TEST(TCPStoreClient, AfterTheServerIsGoneCallsFailAtOnceWithoutConnectingAgain) {
  ScriptedServer server;
  net::Socket first;
  auto probed = probed_client(server, kHonestTimeout, first);
  dist::TCPStore& client = *probed;
  first.close();  // the store's host closes (as when it exits)
  EXPECT_NE(error_of<ember::DistributedError>([&] { client.num_keys(); }).find("lost the connection to the store"),
            std::string::npos);
  EXPECT_NE(error_of<ember::DistributedError>([&] { client.num_keys(); }).find("was closed earlier"),
            std::string::npos);
}

// ---- item 6: huge timeouts and ADD's refusals -----------------------------------------------------

TEST(Deadline, HugeTimeoutsSaturateInsteadOfOverflowing) {
  using Clock = net::Clock;
  const auto now = Clock::now();
  EXPECT_EQ(ember::detail::deadline_after(std::chrono::milliseconds::max(), now), Clock::time_point::max());
  EXPECT_EQ(ember::detail::deadline_after(std::chrono::hours(24 * 365 * 300), now), Clock::time_point::max());
  EXPECT_EQ(ember::detail::deadline_after(1500ms, now), now + 1500ms);
  EXPECT_EQ(ember::detail::deadline_after(-5ms, now), now);
  EXPECT_EQ(ember::detail::saturating_add(std::chrono::milliseconds::max(), 5s), std::chrono::milliseconds::max());
  EXPECT_EQ(ember::detail::saturating_add(1s, 5s), 6s);
}

TEST(TCPStoreClient, HugeTimeoutsSaturateInsteadOfFailingAtOnce) {
  dist::TCPStore master("127.0.0.1", 0, std::nullopt, true, kHonestTimeout);
  for (auto timeout : {std::chrono::milliseconds::max(),
                       std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365 * 300))}) {
    dist::TCPStore client("127.0.0.1", master.port(), std::nullopt, false, timeout);
    client.set("k", "v");
    EXPECT_EQ(client.get("k"), "v");
    EXPECT_EQ(client.add("n", 1), timeout == std::chrono::milliseconds::max() ? 1 : 2);
    client.wait({"k"}, timeout);
    // A WAIT the server times: it must neither expire at once nor overflow its deadline.
    RawClient waiter(master.port());
    // (The server answers a connection's requests while one of its WAITs waits, so the
    // NUM_KEYS reply comes first and says the WAIT was read.)
    waiter.send(keys_request(proto::Command::Wait, {"later"}, timeout.count()) + request(proto::Command::NumKeys));
    char num_keys[9];
    ASSERT_TRUE(waiter.read(num_keys, sizeof(num_keys)));  // NUM_KEYS is answered: the WAIT was read first
    client.set("later", "now");
    char waited[2] = {1, 1};
    ASSERT_TRUE(waiter.read(waited, sizeof(waited)));
    EXPECT_EQ(waited[1], 0) << "the WAIT timed out instead of seeing the key set";
    client.delete_key("later");
  }
}

TEST(TCPStoreClient, AddRefusesANonNumberAndOverflowLeavingTheValue) {
  dist::TCPStore master("127.0.0.1", 0, std::nullopt, true, kHonestTimeout);
  master.set("text", "abc");
  std::string message = error_of<ember::DistributedError>([&] { master.add("text", 1); });
  EXPECT_NE(message.find("TCPStore: add(text, 1): the value of key 'text' is not an integer"), std::string::npos)
      << message;
  EXPECT_EQ(master.get("text"), "abc");
  master.set("max", std::to_string(std::numeric_limits<int64_t>::max()));
  message = error_of<ember::DistributedError>([&] { master.add("max", 1); });
  EXPECT_NE(message.find("TCPStore: add(max, 1) overflows int64: the counter is 9223372036854775807"),
            std::string::npos)
      << message;
  EXPECT_EQ(master.get("max"), std::to_string(std::numeric_limits<int64_t>::max()));
  // The connection is still in step: the next calls get their own replies.
  EXPECT_EQ(master.add("max", -7), std::numeric_limits<int64_t>::max() - 7);
  EXPECT_EQ(master.add("fresh", 5), 5);
}
