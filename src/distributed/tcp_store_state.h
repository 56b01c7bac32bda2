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
//
// Note [Replies share values]
// A reply that carries a stored value (GET, COMPARE_SET) references the value's buffer
// instead of copying it: clients that ask for a large value and do not read the reply
// cost the server no memory per reply (issue 34: eight 13-byte GETs of a 128 MiB value
// held eight copies). A value that replies still reference is never changed in place
// (an APPEND to one copies it; one to a value no reply references appends in place): a
// SET, APPEND, ADD or DELETE of its key swaps or drops the store's pointer, and the value
// is then orphaned:
// its buffer lives on for those replies alone, and orphan_bytes() counts it until the last
// such reply is sent or its connection closed. The server holds what its connections' queued
// replies hold, their heads and the orphaned values, within a budget (Note [No client can
// stall the store] in tcp_store_server.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/socket.h"
#include "distributed/tcp_store_parser.h"

namespace ember::distributed {

/// A stored value, shared by the replies that carry it (Note [Replies share values]).
struct StoredValue {
  std::string bytes;
  bool orphaned = false;  // the store no longer holds it: only replies do
};
using SharedValue = std::shared_ptr<const StoredValue>;

/// One reply: `head`, then the bytes of `value` when it has one.
struct Reply {
  std::string head;
  SharedValue value;
  size_t size() const noexcept { return head.size() + (value ? value->bytes.size() : 0); }
};

class StoreState {
 public:
  using Send = std::function<void(int connection, Reply reply)>;
  using SendBytes = std::function<void(int connection, std::string bytes)>;
  /// `run_id`: when not empty, a REGISTER must carry it to count as a rank (Note [Ranks prove their job]).
  explicit StoreState(Send send, std::string run_id = "");
  /// Replies as flat bytes (each value copied into its reply): for tests of the replies.
  explicit StoreState(SendBytes send, std::string run_id = "");

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

  /// Bytes of orphaned values: values that only replies still reference (Note [Replies share values]).
  uint64_t orphan_bytes() const noexcept { return *orphan_bytes_; }

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
  using Slot = std::shared_ptr<StoredValue>;  // the store's own, mutable while no reply shares it
  Slot make_value(std::string bytes);
  /// Lets go of `slot`'s value, orphaning it when replies still reference it.
  void release(Slot& slot);
  void put(const std::string& key, std::string bytes);
  bool erase(const std::string& key);
  void reply(int connection, std::string bytes) { send_(connection, Reply{std::move(bytes), nullptr}); }
  bool has_all(const std::vector<std::string>& keys) const;
  /// ADD's reply; `wrap`: a sum past int64 wraps (PyTorch's dialect) instead of being refused.
  std::string add(const std::string& key, int64_t amount, bool wrap);
  void handle_torch(int connection, detail::store_protocol::Request& request);
  void wait_done(const KeyWaiter& waiter, bool timed_out);
  std::string departed_reply() const;
  void wake_key_waiters();

  Send send_;
  std::string run_id_;
  std::shared_ptr<uint64_t> orphan_bytes_ = std::make_shared<uint64_t>(0);  // shared with the values' deleters
  std::unordered_map<std::string, Slot> data_;
  std::unordered_map<int, Member> members_;
  std::vector<KeyWaiter> key_waiters_;
  std::vector<DepartureWaiter> departure_waiters_;
  std::vector<int> departed_;
};

}  // namespace ember::distributed
