#include <mutex>

#include "distributed/socket.h"
#include "distributed/tcp_store_protocol.h"
#include "distributed/tcp_store_server.h"
#include "ember/distributed.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::net::Clock;
using namespace detail::store_protocol;

namespace {
// Extra time the client gives the server to answer a WAIT that the server times itself.
constexpr auto kReplyMargin = std::chrono::seconds(5);
}  // namespace

/// One connection to the server; requests are serialised (one in flight at a time).
class TCPStore::Client {
 public:
  Client(const std::string& host, int port, std::chrono::milliseconds timeout)
      : host_(host), port_(port), socket_(detail::net::connect_to(host, port, Clock::now() + timeout)) {}

  /// Sends `request` and returns a reader over the reply, which `read_reply` consumes.
  template <typename ReadReply>
  auto call(const std::string& request, std::chrono::milliseconds timeout, ReadReply&& read_reply) {
    std::lock_guard lock(mutex_);
    EMBER_CHECK(socket_.valid(), DistributedError, "TCPStore: the connection to (", host_, ", ", port_,
                ") was closed earlier");
    if (!detail::net::send_all(socket_.fd(), request.data(), request.size())) lost();
    auto deadline = Clock::now() + timeout;
    return read_reply([&](void* out, size_t bytes) {
      if (!detail::net::recv_all(socket_.fd(), out, bytes, deadline)) lost();
    });
  }
  std::string local_address() const { return detail::net::local_address(socket_); }

 private:
  [[noreturn]] void lost() {
    socket_.close();
    detail::fail<DistributedError>("TCPStore: lost the connection to the store at (", host_, ", ", port_,
                                   "): the process serving it has exited");
  }
  std::string host_;
  int port_;
  std::mutex mutex_;
  detail::net::Socket socket_;
};

namespace {

template <typename Recv>
uint8_t read_u8(Recv& recv) {
  uint8_t v = 0;
  recv(&v, 1);
  return v;
}
template <typename Recv>
int64_t read_i64(Recv& recv) {
  int64_t v = 0;
  recv(&v, sizeof(v));
  return v;
}
template <typename Recv>
std::string read_string(Recv& recv) {
  uint32_t n = 0;
  recv(&n, sizeof(n));
  std::string s(n, '\0');
  if (n > 0) recv(s.data(), n);
  return s;
}

std::string keys_text(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

TCPStore::TCPStore(const std::string& host, int port, std::optional<int> world_size, bool is_master,
                   std::chrono::milliseconds timeout)
    : Store(timeout), host_(host), port_(port) {
  EMBER_CHECK(!world_size || *world_size > 0, ValueError, "TCPStore: world_size must be positive, got ",
              *world_size);
  EMBER_CHECK(port >= 0 && port < 65536, ValueError, "TCPStore: invalid port ", port);
  if (is_master) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  }
  client_ = std::make_unique<Client>(host_, port_, timeout);
}

TCPStore::~TCPStore() = default;

void TCPStore::set(const std::string& key, const std::string& value) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Set));
  put_string(request, key);
  put_string(request, value);
  client_->call(request, timeout(), [](auto recv) { return read_u8(recv); });
}

std::string TCPStore::get(const std::string& key) {
  wait({key});
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Get));
  put_string(request, key);
  auto [found, value] = client_->call(request, timeout(), [](auto recv) {
    bool found = read_u8(recv) != 0;
    return std::pair(found, found ? read_string(recv) : std::string());
  });
  EMBER_CHECK(found, DistributedError, "TCPStore: key '", key, "' was deleted while getting it");
  return value;
}

int64_t TCPStore::add(const std::string& key, int64_t amount) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Add));
  put_string(request, key);
  put_i64(request, amount);
  return client_->call(request, timeout(), [](auto recv) { return read_i64(recv); });
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Check));
  put_i64(request, static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) put_string(request, k);
  return client_->call(request, timeout(), [](auto recv) { return read_u8(recv) != 0; });
}

bool TCPStore::delete_key(const std::string& key) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Delete));
  put_string(request, key);
  return client_->call(request, timeout(), [](auto recv) { return read_u8(recv) != 0; });
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds wait_timeout) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Wait));
  put_i64(request, wait_timeout.count());
  put_i64(request, static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) put_string(request, k);
  bool timed_out = client_->call(request, wait_timeout + kReplyMargin, [](auto recv) { return read_u8(recv) != 0; });
  EMBER_CHECK(!timed_out, DistributedError, "wait timeout after ", wait_timeout.count(), "ms, keys: ",
              keys_text(keys));
}

int64_t TCPStore::num_keys() {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::NumKeys));
  return client_->call(request, timeout(), [](auto recv) { return read_i64(recv); });
}

std::string TCPStore::local_address() const { return client_->local_address(); }

void TCPStore::register_rank(int rank) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Register));
  put_i64(request, rank);
  client_->call(request, timeout(), [](auto recv) { return read_u8(recv); });
}

std::vector<int> TCPStore::departed_ranks(std::chrono::milliseconds wait_timeout) {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Departed));
  put_i64(request, wait_timeout.count());
  return client_->call(request, wait_timeout + kReplyMargin, [](auto recv) {
    std::vector<int> ranks(static_cast<size_t>(read_i64(recv)));
    for (int& rank : ranks) rank = static_cast<int>(read_i64(recv));
    return ranks;
  });
}

void TCPStore::leave() {
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Leave));
  client_->call(request, timeout(), [](auto recv) { return read_u8(recv); });
}

}  // namespace ember::distributed
