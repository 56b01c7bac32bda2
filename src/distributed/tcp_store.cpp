#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "distributed/deadline.h"
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
///
/// Note [Which store the client talks to]
/// The client speaks ember's protocol to an ember server and PyTorch's to a PyTorch one
/// (torchrun's agent, a PyTorch rank 0), in the dialect it speaks (Note [Store dialects]).
/// It learns which on connecting, with requests each server answers or refuses by closing
/// the connection: ember's NUM_KEYS (an ember server answers; PyTorch's close a connection
/// whose first query they do not know), else 1.13's GETNUMKEYS (a 2.x server closes a
/// connection that does not begin with VALIDATE), else VALIDATE and 2.x's GETNUMKEYS.
/// Against a PyTorch server ember's extra commands degrade: REGISTER and LEAVE are not
/// sent, and departed_ranks() cannot name the ranks whose connection closed
/// (tracks_departures() is false), so a collective's error names no departed peer.
///
/// Note [A timed-out connection is never read again]
/// Replies carry no request id: the n-th reply on a connection answers its n-th request.
/// When a call gives up waiting, its reply may still come, and the next call would read it
/// as its own (an add returning the old count, a check true for a missing key). So a call
/// that times out abandons the connection: it tells the server this connection is leaving
/// (so that closing it is no departure of the rank), closes it, and the next call connects
/// again and registers the rank again if one was registered.
class TCPStore::Client {
 public:
  Client(const std::string& host, int port, std::chrono::milliseconds timeout) : host_(host), port_(port) {
    probe(timeout);
  }
  Dialect dialect() const noexcept { return dialect_; }
  /// Whether the last call failed by timing out (its connection is then abandoned).
  bool timed_out() const noexcept { return timed_out_; }

  /// Sends `request` and reads the reply's status, then its result with `read_reply`.
  template <typename ReadReply>
  auto call(const std::string& request, std::chrono::milliseconds timeout, ReadReply&& read_reply) {
    std::lock_guard lock(mutex_);
    EMBER_CHECK(socket_.valid() || may_reconnect_, DistributedError, "TCPStore: the connection to (", host_, ", ",
                port_, ") was closed earlier");
    if (!socket_.valid()) reconnect(timeout);
    timed_out_ = false;
    auto deadline = detail::deadline_after(timeout);
    auto recv = [&](void* out, size_t bytes) {
      bool received = false;
      try {
        received = detail::net::recv_all(socket_.fd(), out, bytes, deadline);
      } catch (const DistributedError&) {
        timed_out_ = true;
        abandon();
        throw;
      }
      if (!received) lost();
    };
    if (!detail::net::send_all(socket_.fd(), request.data(), request.size())) lost();
    if (dialect_ == Dialect::kEmber) read_status(recv);
    return read_reply(recv);
  }
  std::string local_address() const { return detail::net::local_address(socket_); }
  void registered(int rank, std::string run_id) {
    std::lock_guard lock(mutex_);
    rank_ = rank;
    run_id_ = std::move(run_id);
  }

 private:
  detail::net::Socket connect(std::chrono::milliseconds timeout) {
    auto socket = detail::net::connect_to(host_, port_, detail::deadline_after(timeout));
    if (dialect_ == Dialect::kTorch2) {
      std::string validate;
      put_u8(validate, torch2::kValidate);
      put_u32(validate, kTorchValidationMagic);
      if (!detail::net::send_all(socket.fd(), validate.data(), validate.size())) lost();
    }
    return socket;
  }
  /// Note [Which store the client talks to]
  void probe(std::chrono::milliseconds timeout) {
    struct Try {
      Dialect dialect;
      uint8_t byte;
    };
    const Try tries[] = {{Dialect::kEmber, static_cast<uint8_t>(Command::NumKeys)},
                         {Dialect::kTorch1, torch1::kNumKeys},
                         {Dialect::kTorch2, torch2::kNumKeys}};
    auto deadline = detail::deadline_after(timeout);
    for (const Try& t : tries) {
      dialect_ = t.dialect;
      socket_ = detail::net::connect_to(host_, port_, deadline);
      std::string request;
      if (t.dialect == Dialect::kTorch2) {
        put_u8(request, torch2::kValidate);
        put_u32(request, kTorchValidationMagic);
      }
      put_u8(request, t.byte);
      if (!detail::net::send_all(socket_.fd(), request.data(), request.size())) continue;
      uint8_t status = 0;
      char count[sizeof(int64_t)];
      if (t.dialect == Dialect::kEmber && detail::net::recv_all(socket_.fd(), &status, 1, deadline)) {
        if (status != static_cast<uint8_t>(Status::kOk)) {
          // An ember server that refuses this connection (too many connections): the
          // first call connects again and reports why (Note [A timed-out connection is never read again]).
          socket_.close();
          may_reconnect_ = true;
          return;
        }
        if (detail::net::recv_all(socket_.fd(), count, sizeof(count), deadline)) return;
      } else if (t.dialect != Dialect::kEmber && detail::net::recv_all(socket_.fd(), count, sizeof(count), deadline)) {
        return;
      }
      socket_.close();
    }
    detail::fail<DistributedError>("TCPStore: the server at (", host_, ", ", port_,
                                   ") speaks neither ember's nor PyTorch's store protocol");
  }
  void reconnect(std::chrono::milliseconds timeout) {
    socket_ = connect(timeout);
    may_reconnect_ = false;
    if (rank_ < 0 || dialect_ != Dialect::kEmber) return;
    std::string request;
    put_u8(request, static_cast<uint8_t>(Command::Register));
    put_i64(request, rank_);
    put_string(request, run_id_);
    auto deadline = detail::deadline_after(timeout);
    char status = 0;
    try {
      if (!detail::net::send_all(socket_.fd(), request.data(), request.size()) ||
          !detail::net::recv_all(socket_.fd(), &status, 1, deadline) || status != 0) {
        lost();
      }
    } catch (const DistributedError&) {
      if (socket_.valid()) abandon();  // timed out: its reply must not be read as the next one's
      throw;
    }
  }
  template <typename Recv>
  void read_status(Recv& recv) {
    uint8_t status = 0;
    recv(&status, 1);
    if (status == static_cast<uint8_t>(Status::kOk)) return;
    if (status != static_cast<uint8_t>(Status::kError) && status != static_cast<uint8_t>(Status::kClosing)) {
      socket_.close();
      detail::fail<DistributedError>("TCPStore: the store at (", host_, ", ", port_,
                                     ") sent a reply ember cannot read (status byte ", static_cast<int>(status), ")");
    }
    uint32_t n = 0;
    recv(&n, sizeof(n));
    std::string message(std::min<uint32_t>(n, 1u << 16), '\0');
    if (!message.empty()) recv(message.data(), message.size());
    // kClosing: the server closes the connection; the next call connects again.
    if (status == static_cast<uint8_t>(Status::kClosing) || n != message.size()) {
      socket_.close();
      may_reconnect_ = true;
    }
    detail::fail<DistributedError>(message);
  }
  /// Note [A timed-out connection is never read again]
  void abandon() noexcept {
    if (rank_ >= 0 && dialect_ == Dialect::kEmber) {
      char leave = static_cast<char>(Command::Leave);
      (void)!::send(socket_.fd(), &leave, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    socket_.close();
    may_reconnect_ = true;
  }
  /// The server is gone: later calls fail at once rather than wait to connect again.
  [[noreturn]] void lost() {
    socket_.close();
    detail::fail<DistributedError>("TCPStore: lost the connection to the store at (", host_, ", ", port_,
                                   "): the process serving it has exited");
  }
  std::string host_;
  int port_;
  std::mutex mutex_;
  int rank_ = -1;
  std::string run_id_;
  Dialect dialect_ = Dialect::kEmber;
  bool timed_out_ = false;
  // The connection was closed by a timeout or by the server's kClosing reply, not lost:
  // the next call connects again.
  bool may_reconnect_ = false;
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

/// A key or value, refused here when the server would refuse it (Limits).
void put_checked(std::string& request, const std::string& s, bool is_value) {
  const Limits limits;
  uint64_t limit = is_value ? limits.max_value_bytes : limits.max_key_bytes;
  EMBER_CHECK(s.size() <= limit, ValueError, "TCPStore: a ", is_value ? "value" : "key", " of ", s.size(),
              " bytes exceeds the store's limit of ", limit, " bytes");
  put_string(request, s);
}
void put_key(std::string& request, const std::string& key) { put_checked(request, key, false); }

void put_keys(std::string& request, const std::vector<std::string>& keys) {
  const Limits limits;
  EMBER_CHECK(static_cast<int64_t>(keys.size()) <= limits.max_keys, ValueError, "TCPStore: a request for ", keys.size(),
              " keys exceeds the store's limit of ", limits.max_keys, " keys");
  put_i64(request, static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) put_key(request, k);
  EMBER_CHECK(request.size() <= limits.max_request_bytes, ValueError, "TCPStore: a request of ", request.size(),
              " bytes exceeds the store's limit of ", limits.max_request_bytes, " bytes");
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
  EMBER_CHECK(!world_size || *world_size > 0, ValueError, "TCPStore: world_size must be positive, got ", *world_size);
  EMBER_CHECK(port >= 0 && port < 65536, ValueError, "TCPStore: invalid port ", port);
  if (is_master) {
    const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
    server_ = std::make_unique<TCPStoreServer>(port, Limits{}, "", run_id ? run_id : "");
    port_ = server_->port();
  }
  client_ = std::make_unique<Client>(host_, port_, timeout);
}

TCPStore::~TCPStore() = default;

namespace {

/// The first bytes of a request for `command` in the client's dialect.
std::string start_request(Dialect dialect, Command command) {
  std::string request;
  if (dialect == Dialect::kEmber) {
    put_u8(request, static_cast<uint8_t>(command));
    return request;
  }
  uint8_t byte = 0;
  switch (command) {
    case Command::Set: byte = torch2::kSet; break;
    case Command::Get: byte = torch2::kGet; break;
    case Command::Add: byte = torch2::kAdd; break;
    case Command::Check: byte = torch2::kCheck; break;
    case Command::Delete: byte = torch2::kDelete; break;
    case Command::Wait: byte = torch2::kWait; break;
    case Command::NumKeys: byte = torch2::kNumKeys; break;
    default: detail::fail<DistributedError>("TCPStore: no PyTorch query for this request");
  }
  // 1.13 has no VALIDATE: its bytes are 2.x's less one, but for DELETE_KEY (8 in both).
  bool shift = dialect == Dialect::kTorch1 && byte != torch2::kDelete;
  put_u8(request, shift ? static_cast<uint8_t>(byte - 1) : byte);
  return request;
}

/// A key or value in the dialect's string encoding, refused as the server would refuse it.
void put_field(Dialect dialect, std::string& request, const std::string& s, bool is_value) {
  if (dialect == Dialect::kEmber) return put_checked(request, s, is_value);
  const Limits limits;
  uint64_t limit = is_value ? limits.max_value_bytes : limits.max_key_bytes;
  EMBER_CHECK(s.size() <= limit, ValueError, "TCPStore: a ", is_value ? "value" : "key", " of ", s.size(),
              " bytes exceeds the store's limit of ", limit, " bytes");
  put_torch_string(request, s);
}

void put_all_keys(Dialect dialect, std::string& request, const std::vector<std::string>& keys) {
  if (dialect == Dialect::kEmber) return put_keys(request, keys);
  const Limits limits;
  EMBER_CHECK(static_cast<int64_t>(keys.size()) <= limits.max_keys, ValueError, "TCPStore: a request for ", keys.size(),
              " keys exceeds the store's limit of ", limits.max_keys, " keys");
  put_u64(request, keys.size());
  for (const auto& k : keys) put_field(dialect, request, k, false);
}

template <typename Recv>
std::string read_torch_string(Recv& recv) {
  uint64_t n = 0;
  recv(&n, sizeof(n));
  const Limits limits;
  EMBER_CHECK(n <= limits.max_value_bytes, DistributedError, "TCPStore: the store sent a value of ", n,
              " bytes, over the limit of ", limits.max_value_bytes);
  std::string s(n, '\0');
  if (n > 0) recv(s.data(), n);
  return s;
}

}  // namespace

void TCPStore::set(const std::string& key, const std::string& value) {
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Set);
  put_field(d, request, key, false);
  put_field(d, request, value, /*is_value=*/true);
  client_->call(request, timeout(), [](auto) { return 0; });  // PyTorch's SET has no reply
}

std::string TCPStore::get(const std::string& key) {
  wait({key});
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Get);
  put_field(d, request, key, false);
  auto [found, value] = client_->call(request, timeout(), [d](auto recv) {
    if (d != Dialect::kEmber) return std::pair(true, read_torch_string(recv));
    bool found = read_u8(recv) != 0;
    return std::pair(found, found ? read_string(recv) : std::string());
  });
  EMBER_CHECK(found, DistributedError, "TCPStore: key '", key, "' was deleted while getting it");
  return value;
}

int64_t TCPStore::add(const std::string& key, int64_t amount) {
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Add);
  put_field(d, request, key, false);
  put_i64(request, amount);
  return client_->call(request, timeout(), [](auto recv) { return read_i64(recv); });
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Check);
  put_all_keys(d, request, keys);
  // ember: 1 when all are set; PyTorch: READY = 0.
  return client_->call(request, timeout(), [d](auto recv) { return (read_u8(recv) != 0) == (d == Dialect::kEmber); });
}

bool TCPStore::delete_key(const std::string& key) {
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Delete);
  put_field(d, request, key, false);
  return client_->call(request, timeout(),
                       [d](auto recv) { return d == Dialect::kEmber ? read_u8(recv) != 0 : read_i64(recv) != 0; });
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds wait_timeout) {
  Dialect d = client_->dialect();
  std::string request = start_request(d, Command::Wait);
  bool timed_out = false;
  if (d == Dialect::kEmber) {
    put_i64(request, wait_timeout.count());
    put_all_keys(d, request, keys);
    timed_out = client_->call(request, detail::saturating_add(wait_timeout, kReplyMargin),
                              [](auto recv) { return read_u8(recv) != 0; });
  } else {
    // PyTorch's server does not time a WAIT: the client does, and abandons the connection
    // (Note [A timed-out connection is never read again]).
    put_all_keys(d, request, keys);
    try {
      client_->call(request, wait_timeout, [](auto recv) { return read_u8(recv); });
    } catch (const DistributedError&) {
      if (!client_->timed_out()) throw;
      timed_out = true;
    }
  }
  EMBER_CHECK(!timed_out, DistributedError, "wait timeout after ", wait_timeout.count(), "ms, keys: ", keys_text(keys));
}

int64_t TCPStore::num_keys() {
  std::string request = start_request(client_->dialect(), Command::NumKeys);
  return client_->call(request, timeout(), [](auto recv) { return read_i64(recv); });
}

std::string TCPStore::local_address() const { return client_->local_address(); }

bool TCPStore::tracks_departures() const noexcept { return client_->dialect() == Dialect::kEmber; }

void TCPStore::register_rank(int rank) {
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  std::string id = run_id ? run_id : "";
  if (client_->dialect() == Dialect::kEmber) {
    std::string request;
    put_u8(request, static_cast<uint8_t>(Command::Register));
    put_i64(request, rank);
    put_string(request, id);
    client_->call(request, timeout(), [](auto) { return 0; });
  }
  client_->registered(rank, id);
}

std::vector<int> TCPStore::departed_ranks(std::chrono::milliseconds wait_timeout) {
  if (client_->dialect() != Dialect::kEmber) return {};  // Note [Which store the client talks to]
  std::string request;
  put_u8(request, static_cast<uint8_t>(Command::Departed));
  put_i64(request, wait_timeout.count());
  return client_->call(request, detail::saturating_add(wait_timeout, kReplyMargin), [](auto recv) {
    std::vector<int> ranks(static_cast<size_t>(read_i64(recv)));
    for (int& rank : ranks) rank = static_cast<int>(read_i64(recv));
    return ranks;
  });
}

void TCPStore::leave() {
  if (client_->dialect() == Dialect::kEmber) {
    std::string request;
    put_u8(request, static_cast<uint8_t>(Command::Leave));
    client_->call(request, timeout(), [](auto) { return 0; });
  }
  client_->registered(-1, "");
}

}  // namespace ember::distributed
