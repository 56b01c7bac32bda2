// The data behind the TCPStore server, apart from its sockets.
//
// StoreState answers parsed requests (tcp_store_parser.h) for connections it knows by a
// number (the server's descriptor), through a callback that queues the reply bytes: now,
// or later for a WAIT or DEPARTED that waits. It also keeps the ranks whose connection
// closed without leaving, in order: a process that dies closes its sockets, so survivors
// of a collective can learn which peer is gone (TCPStore::departed_ranks). The callback
// must not call back into StoreState (the server defers closing a connection to after).
//
// Note [Ranks prove their job]
// A departed rank is blamed in the survivors' errors, so only a connection that proves it
// belongs to the job may register as a rank: a server given a run id (ember-run's, passed
// to its ranks as TORCHELASTIC_RUN_ID) refuses a REGISTER that does not carry it, and that
// connection is never counted as a rank. The run id is a bearer secret against clients
// that do not have it (other users' processes that reach the port), not against the job's
// own processes; the store's data itself is open to any client, as PyTorch's is
// (PyTorch's protocol has no authentication): keep a multi-node job's store port on a
// private network.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/socket.h"
#include "distributed/tcp_store_parser.h"

namespace ember::distributed {

class StoreState {
 public:
  using Send = std::function<void(int connection, std::string bytes)>;
  /// `run_id`: when not empty, a REGISTER must carry it to count as a rank (Note [Ranks prove their job]).
  explicit StoreState(Send send, std::string run_id = "") : send_(std::move(send)), run_id_(std::move(run_id)) {}

  /// Answers `request` from `connection`, now or when what it waits for happens. A request
  /// in a PyTorch dialect that cannot be served throws DistributedError: PyTorch's protocol
  /// has no error reply, the server closes the connection (as PyTorch's does).
  void handle(int connection, detail::store_protocol::Request request);
  /// Forgets `connection`; a rank that closed without leaving has departed.
  void closed(int connection);
  /// Answers the waits whose deadline is at or before `now`.
  void expire(detail::net::Clock::time_point now);
  /// The earliest deadline of a waiting request (time_point::max() when none).
  detail::net::Clock::time_point next_deadline() const;

  /// A kOk reply with `payload`; a kError or kClosing reply with `message`.
  static std::string ok(const std::string& payload = "");
  static std::string error(detail::store_protocol::Status status, const std::string& message);

 private:
  struct Member {
    int rank = -1;
    bool left = false;
  };
  struct KeyWaiter {
    int connection;
    detail::store_protocol::Dialect dialect;
    std::vector<std::string> keys;
    detail::net::Clock::time_point deadline;
  };
  struct DepartureWaiter {
    int connection;
    detail::net::Clock::time_point deadline;
  };
  bool has_all(const std::vector<std::string>& keys) const;
  std::string add(const std::string& key, int64_t amount);
  void handle_torch(int connection, detail::store_protocol::Request& request);
  void wait_done(const KeyWaiter& waiter, bool timed_out);
  std::string departed_reply() const;
  void wake_key_waiters();

  Send send_;
  std::string run_id_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<int, Member> members_;
  std::vector<KeyWaiter> key_waiters_;
  std::vector<DepartureWaiter> departure_waiters_;
  std::vector<int> departed_;
};

}  // namespace ember::distributed
