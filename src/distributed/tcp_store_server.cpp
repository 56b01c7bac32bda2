#include "distributed/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/tcp_store_protocol.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::net::Clock;
using namespace detail::store_protocol;

namespace {

struct Client {
  std::string input;
  int rank = -1;
  bool left = false;
};

struct KeyWaiter {
  int fd;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct DepartureWaiter {
  int fd;
  Clock::time_point deadline;
};

}  // namespace

struct TCPStoreServer::State {
  std::unordered_map<std::string, std::string> data;
  std::map<int, Client> clients;  // by fd
  std::vector<KeyWaiter> key_waiters;
  std::vector<DepartureWaiter> departure_waiters;
  std::vector<int> departed;

  bool has_all(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data.count(k) != 0; });
  }
  static void reply(int fd, const std::string& bytes) { detail::net::send_all(fd, bytes.data(), bytes.size()); }
  static void reply_u8(int fd, uint8_t v) {
    std::string out;
    put_u8(out, v);
    reply(fd, out);
  }
  void reply_departed(int fd) {
    std::string out;
    put_i64(out, static_cast<int64_t>(departed.size()));
    for (int rank : departed) put_i64(out, rank);
    reply(fd, out);
  }
  void wake_key_waiters() {
    std::erase_if(key_waiters, [&](const KeyWaiter& w) {
      if (!has_all(w.keys)) return false;
      reply_u8(w.fd, 0);
      return true;
    });
  }
  void expire(Clock::time_point now) {
    std::erase_if(key_waiters, [&](const KeyWaiter& w) {
      if (w.deadline > now) return false;
      reply_u8(w.fd, 1);
      return true;
    });
    std::erase_if(departure_waiters, [&](const DepartureWaiter& w) {
      if (w.deadline > now) return false;
      reply_departed(w.fd);
      return true;
    });
  }
  Clock::time_point next_deadline() const {
    auto next = Clock::time_point::max();
    for (const auto& w : key_waiters) next = std::min(next, w.deadline);
    for (const auto& w : departure_waiters) next = std::min(next, w.deadline);
    return next;
  }
  void close_client(int fd) {
    auto it = clients.find(fd);
    if (it->second.rank >= 0 && !it->second.left) {
      departed.push_back(it->second.rank);
      for (const auto& w : departure_waiters) reply_departed(w.fd);
      departure_waiters.clear();
    }
    std::erase_if(key_waiters, [&](const KeyWaiter& w) { return w.fd == fd; });
    std::erase_if(departure_waiters, [&](const DepartureWaiter& w) { return w.fd == fd; });
    clients.erase(it);
    ::close(fd);
  }

  /// Handles one complete request at the front of `client.input`; false when incomplete.
  bool handle_one(int fd, Client& client) {
    Reader in(client.input.data(), client.input.size());
    auto command = static_cast<Command>(in.u8());
    std::string out;
    bool deferred = false;
    switch (command) {
      case Command::Set: {
        std::string key = in.string(), value = in.string();
        if (!in.ok()) return false;
        data[key] = std::move(value);
        put_u8(out, 0);
        break;
      }
      case Command::Get: {
        std::string key = in.string();
        if (!in.ok()) return false;
        auto it = data.find(key);
        put_u8(out, it != data.end());
        if (it != data.end()) put_string(out, it->second);
        break;
      }
      case Command::Add: {
        std::string key = in.string();
        int64_t amount = in.i64();
        if (!in.ok()) return false;
        auto it = data.find(key);
        int64_t value = (it == data.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10)) + amount;
        data[key] = std::to_string(value);
        put_i64(out, value);
        break;
      }
      case Command::Check:
      case Command::Wait: {
        int64_t timeout_ms = command == Command::Wait ? in.i64() : 0;
        int64_t n = in.i64();
        std::vector<std::string> keys;
        for (int64_t i = 0; i < n && in.ok(); ++i) keys.push_back(in.string());
        if (!in.ok()) return false;
        bool ready = has_all(keys);
        if (command == Command::Check || ready) {
          put_u8(out, command == Command::Check ? ready : 0);
        } else {
          key_waiters.push_back({fd, std::move(keys), Clock::now() + std::chrono::milliseconds(timeout_ms)});
          deferred = true;
        }
        break;
      }
      case Command::Delete: {
        std::string key = in.string();
        if (!in.ok()) return false;
        put_u8(out, data.erase(key) != 0);
        break;
      }
      case Command::NumKeys:
        put_i64(out, static_cast<int64_t>(data.size()));
        break;
      case Command::Register: {
        int64_t rank = in.i64();
        if (!in.ok()) return false;
        client.rank = static_cast<int>(rank);
        put_u8(out, 0);
        break;
      }
      case Command::Leave:
        client.left = true;
        put_u8(out, 0);
        break;
      case Command::Departed: {
        int64_t timeout_ms = in.i64();
        if (!in.ok()) return false;
        if (departed.empty() && timeout_ms > 0) {
          departure_waiters.push_back({fd, Clock::now() + std::chrono::milliseconds(timeout_ms)});
          deferred = true;
        } else {
          std::string list;
          put_i64(list, static_cast<int64_t>(departed.size()));
          for (int rank : departed) put_i64(list, rank);
          out = std::move(list);
        }
        break;
      }
      default:
        if (!in.ok()) return false;
        client.input.clear();  // not a client of ours: drop what it sent
        return false;
    }
    if (!in.ok()) return false;
    client.input.erase(0, in.consumed());
    if (!deferred) reply(fd, out);
    if (command == Command::Set || command == Command::Add) wake_key_waiters();
    return true;
  }
};

TCPStoreServer::TCPStoreServer(int port)
    : listener_(detail::net::listen_on(port)), port_(detail::net::local_port(listener_)), state_(std::make_unique<State>()) {
  EMBER_CHECK(::pipe2(wake_, O_CLOEXEC) == 0, DistributedError, "TCPStore server: pipe failed");
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  char byte = 0;
  (void)!::write(wake_[1], &byte, 1);
  thread_.join();
  for (auto& [fd, client] : state_->clients) ::close(fd);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TCPStoreServer::run() noexcept {
  State& state = *state_;
  std::vector<pollfd> fds;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& [fd, client] : state.clients) fds.push_back({fd, POLLIN, 0});
    auto deadline = state.next_deadline();
    int timeout = deadline == Clock::time_point::max() ? -1 : detail::net::poll_timeout_ms(deadline);
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) state.clients.emplace(fd, Client{});
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int fd = fds[i].fd;
      ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        state.close_client(fd);
        continue;
      }
      Client& client = state.clients.at(fd);
      client.input.append(buffer.data(), static_cast<size_t>(n));
      while (!client.input.empty() && state.handle_one(fd, client)) {
      }
    }
    state.expire(Clock::now());
  }
}

}  // namespace ember::distributed
