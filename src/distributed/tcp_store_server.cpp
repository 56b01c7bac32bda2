#include "distributed/tcp_store_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "distributed/tcp_store_parser.h"
#include "distributed/tcp_store_state.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::net::Clock;
using namespace detail::store_protocol;

namespace {

// How long a refused client has to read why before its connection is closed.
constexpr auto kLinger = std::chrono::seconds(2);
// How long the listener rests when no descriptor can be freed to accept a client.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr size_t kReadChunk = 64 * 1024;

// Buffers per sendmsg: two per reply (its head and its shared value).
constexpr int kMaxIov = 64;

struct Connection {
  explicit Connection(const Limits& limits) : parser(limits) {}
  RequestParser parser;
  std::deque<Reply> output;  // replies not sent yet; `sent` bytes of the first are
  size_t sent = 0;
  size_t pending_bytes = 0;  // unsent bytes of `output`
  size_t head_bytes = 0;     // bytes of `output`'s heads (its own memory; values are shared)
  bool closing = false;      // refused: flush, shut down writing, discard input until EOF or close_by
  bool doomed = false;       // closed after the current step (see Loop::close_doomed)
  Clock::time_point close_by = Clock::time_point::max();
  size_t pending() const noexcept { return pending_bytes; }
  /// What it holds of the server's reply memory: its heads and the orphaned values it references.
  uint64_t held() const noexcept {
    uint64_t bytes = head_bytes;
    for (const Reply& r : output) bytes += r.value && r.value->orphaned ? r.value->bytes.size() : 0;
    return bytes;
  }
};

int open_reserve() noexcept { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

/// Tells a client the server does not keep why, and closes it (nothing blocks: the reply
/// is small and the socket new).
void refuse(int fd, const std::string& message) noexcept {
  try {
    std::string frame = StoreState::error(Status::kClosing, message);
    (void)!::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    // Read what the client already sent, so that the close sends FIN, not a reset that
    // could discard the reply before the client reads it.
    char sink[4096];
    while (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
  } catch (...) {
  }
  ::close(fd);
}

}  // namespace

class TCPStoreServer::Loop {
 public:
  explicit Loop(TCPStoreServer& server)
      : server_(server),
        limits_(server.limits_),
        state_(StoreState::Send([this](int fd, Reply reply) { queue(fd, std::move(reply)); }), server.run_id_),
        reserve_(server.reserve_) {}
  ~Loop() {
    for (auto& [fd, connection] : connections_) ::close(fd);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  void run();

 private:
  void accept_clients(Clock::time_point now);
  void read_from(int fd, Connection& c, std::vector<char>& buffer);
  void queue(int fd, Reply reply);
  void flush(int fd, Connection& c);
  void sent(Connection& c, size_t bytes);
  void enforce_budget();
  void publish_stats();
  void close_with(int fd, Connection& c, const std::string& message);
  void close_doomed();
  Clock::time_point next_deadline() const;

  TCPStoreServer& server_;
  const Limits& limits_;
  StoreState state_;
  std::map<int, Connection> connections_;  // by descriptor
  int& reserve_;                           // the server's (closed by its destructor)
  Clock::time_point listener_rests_until_{};
  uint64_t head_bytes_ = 0;  // every connection's head_bytes
};

void TCPStoreServer::Loop::run() {
  std::vector<pollfd> fds;
  std::vector<char> buffer(kReadChunk);
  for (;;) {
    auto now = Clock::now();
    fds.clear();
    fds.push_back({server_.wake_[0], POLLIN, 0});
    fds.push_back({now >= listener_rests_until_ ? server_.listener_.fd() : -1, POLLIN, 0});  // -1: not polled
    for (const auto& [fd, c] : connections_) {
      fds.push_back({fd, static_cast<short>(POLLIN | (c.pending() > 0 ? POLLOUT : 0)), 0});
    }
    auto deadline = next_deadline();
    int timeout = deadline == Clock::time_point::max() ? -1 : detail::net::poll_timeout_ms(deadline);
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) return;
    if (rc > 0 && fds[0].revents != 0) return;
    if (rc > 0 && (fds[1].revents & POLLIN)) accept_clients(Clock::now());
    for (size_t i = 2; rc > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = connections_.find(fds[i].fd);
      if (it == connections_.end() || it->second.doomed) continue;
      if (fds[i].revents & POLLOUT) flush(it->first, it->second);
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !it->second.doomed)
        read_from(it->first, it->second, buffer);
      close_doomed();
      enforce_budget();
    }
    now = Clock::now();
    state_.expire(now);
    for (auto& [fd, c] : connections_) {
      if (c.close_by <= now) c.doomed = true;
    }
    close_doomed();
    publish_stats();
  }
}

Clock::time_point TCPStoreServer::Loop::next_deadline() const {
  auto next = state_.next_deadline();
  if (listener_rests_until_ > Clock::now()) next = std::min(next, listener_rests_until_);
  for (const auto& [fd, c] : connections_) next = std::min(next, c.close_by);
  return next;
}

void TCPStoreServer::Loop::accept_clients(Clock::time_point now) {
  if (reserve_ < 0) reserve_ = open_reserve();  // lost to another thread of the process: take it back
  for (int accepted = 0; accepted < 64; ++accepted) {
    int fd = ::accept4(server_.listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      if ((error == EMFILE || error == ENFILE) && reserve_ >= 0) {
        // Free the reserve to take the client off the backlog and tell it why, then take
        // the reserve back (Note [No client can stall the store]).
        ::close(reserve_);
        int client = ::accept4(server_.listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        int accept_error = errno;
        if (client >= 0) {
          refuse(client,
                 "TCPStore: the store's host is out of file descriptors (too many open files); "
                 "try again when fewer clients are connected");
        }
        reserve_ = open_reserve();
        // One refusal per wake-up (the listener stays readable for the next): a second
        // accept4 would fail for want of a descriptor before looking at the backlog (Linux
        // takes one first), and each close of the reserve is a moment in which another
        // thread of the process can take its descriptor for good.
        if (client >= 0 || accept_error == EAGAIN || accept_error == EWOULDBLOCK) return;
      }
      // Out of descriptors with none to free, or out of memory: rest, then try again.
      listener_rests_until_ = now + kAcceptBackoff;
      return;
    }
    if (connections_.size() >= limits_.max_connections) {
      refuse(fd, detail::cat("TCPStore: the store serves at most ", limits_.max_connections, " connections at once"));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    try {
      connections_.emplace(fd, Connection(limits_));
    } catch (const std::bad_alloc&) {
      refuse(fd, "TCPStore: the store's host is out of memory");
    }
  }
}

void TCPStoreServer::Loop::read_from(int fd, Connection& c, std::vector<char>& buffer) {
  ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    c.doomed = true;
    return;
  }
  if (c.closing) return;  // refused: what it sends now is dropped
  size_t size = static_cast<size_t>(n), pos = 0;
  try {
    while (pos < size && !c.doomed && !c.closing) {
      size_t consumed = c.parser.feed(buffer.data() + pos, size - pos);
      pos += consumed;
      server_.bytes_parsed_.fetch_add(consumed, std::memory_order_relaxed);  // before any reply

      if (c.parser.state() == RequestParser::State::kReady) {
        state_.handle(fd, c.parser.take());
      } else if (c.parser.state() == RequestParser::State::kError) {
        close_with(fd, c, c.parser.error());
      }
    }
  } catch (const std::bad_alloc&) {
    // The host is out of memory: this client's request fails, not the process.
    close_with(fd, c, "TCPStore: the store's host is out of memory");
  } catch (const DistributedError& e) {
    close_with(fd, c, e.what());  // a PyTorch request the store cannot serve
  } catch (const std::exception& e) {
    close_with(fd, c, detail::cat("TCPStore: the store failed to serve the request: ", e.what()));
  }
}

void TCPStoreServer::Loop::queue(int fd, Reply reply) {
  auto it = connections_.find(fd);
  if (it == connections_.end() || it->second.doomed || it->second.closing) return;
  Connection& c = it->second;
  if (c.pending() > 0 && c.pending() + reply.size() > limits_.max_pending_output) {
    c.doomed = true;  // it sends requests and does not read the replies
    return;
  }
  c.pending_bytes += reply.size();
  c.head_bytes += reply.head.size();
  head_bytes_ += reply.head.size();
  c.output.push_back(std::move(reply));
  flush(fd, c);
}

void TCPStoreServer::Loop::flush(int fd, Connection& c) {
  while (c.pending() > 0) {
    // The unsent bytes of up to kMaxIov / 2 replies, in one sendmsg.
    iovec iov[kMaxIov];
    size_t count = 0, skip = c.sent;
    for (auto r = c.output.begin(); r != c.output.end() && count + 2 <= kMaxIov; ++r) {
      const std::string* parts[2] = {&r->head, r->value ? &r->value->bytes : nullptr};
      for (const std::string* part : parts) {
        if (part == nullptr) continue;
        if (skip >= part->size()) {
          skip -= part->size();
          continue;
        }
        iov[count++] = {const_cast<char*>(part->data()) + skip, part->size() - skip};
        skip = 0;
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent(c, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      c.doomed = true;
      return;
    }
  }
  if (c.pending() == 0 && c.closing) ::shutdown(fd, SHUT_WR);
}

void TCPStoreServer::Loop::sent(Connection& c, size_t bytes) {
  c.pending_bytes -= bytes;
  bytes += c.sent;
  while (!c.output.empty() && bytes >= c.output.front().size()) {
    bytes -= c.output.front().size();
    c.head_bytes -= c.output.front().head.size();
    head_bytes_ -= c.output.front().head.size();
    c.output.pop_front();  // may free an orphaned value (Note [Replies share values])
  }
  c.sent = bytes;
}

void TCPStoreServer::Loop::enforce_budget() {
  // Note [No client can stall the store]: over the budget, the connections holding the most
  // of it are closed, one at a time (closing one frees the orphaned values only it held).
  while (head_bytes_ + state_.orphan_bytes() > limits_.max_reply_memory) {
    Connection* victim = nullptr;
    uint64_t most = 0;
    for (auto& [fd, c] : connections_) {
      uint64_t held = c.held();
      if (held > most) {
        victim = &c;
        most = held;
      }
    }
    if (victim == nullptr) return;
    victim->doomed = true;
    server_.clients_over_budget_.fetch_add(1, std::memory_order_relaxed);
    close_doomed();
  }
}

void TCPStoreServer::Loop::publish_stats() {
  uint64_t held = head_bytes_ + state_.orphan_bytes();
  server_.reply_bytes_held_.store(held, std::memory_order_relaxed);
  if (held > server_.peak_reply_bytes_held_.load(std::memory_order_relaxed)) {
    server_.peak_reply_bytes_held_.store(held, std::memory_order_relaxed);
  }
}

void TCPStoreServer::Loop::close_with(int fd, Connection& c, const std::string& message) {
  c.closing = true;
  c.close_by = Clock::now() + kLinger;
  // PyTorch's protocol has no error reply: its client sees the connection close, after
  // the replies already queued (Note [Store dialects]).
  if (c.parser.dialect() == Dialect::kEmber) {
    Reply frame{StoreState::error(Status::kClosing, message), nullptr};
    c.pending_bytes += frame.size();
    c.head_bytes += frame.head.size();
    head_bytes_ += frame.head.size();
    c.output.push_back(std::move(frame));
  }
  flush(fd, c);
}

void TCPStoreServer::Loop::close_doomed() {
  // Closing one connection can doom another (a departure replied to a waiter that does
  // not read), so repeat until none is left.
  for (bool again = true; again;) {
    again = false;
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->second.doomed) {
        ++it;
        continue;
      }
      int fd = it->first;
      head_bytes_ -= it->second.head_bytes;
      it = connections_.erase(it);
      ::close(fd);
      state_.closed(fd);
      again = true;
    }
  }
}

TCPStoreServer::TCPStoreServer(int port, const Limits& limits, const std::string& bind_host, std::string run_id)
    : limits_(limits),
      run_id_(std::move(run_id)),
      listener_(bind_host.empty() ? detail::net::listen_on(port) : detail::net::listen_on(bind_host, port)),
      port_(detail::net::local_port(listener_)) {
  EMBER_CHECK(::pipe2(wake_, O_CLOEXEC) == 0, DistributedError, "TCPStore server: pipe failed");
  reserve_ = open_reserve();  // before any client can come (not when the thread starts)
  int flags = ::fcntl(listener_.fd(), F_GETFL);
  ::fcntl(listener_.fd(), F_SETFL, flags | O_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  char byte = 0;
  (void)!::write(wake_[1], &byte, 1);
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  if (reserve_ >= 0) ::close(reserve_);
}

void TCPStoreServer::run() noexcept {
  try {
    Loop loop(*this);
    loop.run();
  } catch (...) {
    // Only the loop's own bookkeeping can throw here (out of memory between clients):
    // the server stops, its clients then see their connection closed.
  }
}

}  // namespace ember::distributed
