#include "distributed/tcp_store_state.h"

#include <algorithm>
#include <limits>

#include "core/checked_math.h"
#include "distributed/deadline.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::net::Clock;
using namespace detail::store_protocol;

StoreState::StoreState(Send send, std::string run_id) : send_(std::move(send)), run_id_(std::move(run_id)) {}

StoreState::StoreState(SendBytes send, std::string run_id)
    : send_([send = std::move(send)](int connection, Reply reply) {
        if (reply.value) reply.head += reply.value->bytes;
        send(connection, std::move(reply.head));
      }),
      run_id_(std::move(run_id)) {}

StoreState::Slot StoreState::make_value(std::string bytes) {
  return Slot(new StoredValue{std::move(bytes)}, [orphans = orphan_bytes_](StoredValue* value) {
    if (value->orphaned) *orphans -= value->bytes.size();
    delete value;
  });
}

void StoreState::release(Slot& slot) {
  if (slot && slot.use_count() > 1) {  // queued replies reference it
    slot->orphaned = true;
    *orphan_bytes_ += slot->bytes.size();
  }
  slot.reset();
}

bool StoreState::erase(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  release(it->second);
  data_.erase(it);
  return true;
}

void StoreState::put(const std::string& key, std::string bytes) {
  Slot& slot = data_[key];
  release(slot);
  slot = make_value(std::move(bytes));
}

std::string StoreState::ok(const std::string& payload) {
  std::string out;
  put_status(out, Status::kOk);
  out += payload;
  return out;
}

std::string StoreState::error(Status status, const std::string& message) {
  std::string out;
  put_status(out, status);
  put_string(out, message);
  return out;
}

bool StoreState::has_all(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data_.count(k) != 0; });
}

std::string StoreState::departed_reply() const {
  std::string out;
  put_i64(out, static_cast<int64_t>(departed_.size()));
  for (int rank : departed_) put_i64(out, rank);
  return ok(out);
}

void StoreState::wait_done(const KeyWaiter& waiter, bool timed_out) {
  // PyTorch's STOP_WAITING is 0; its waits have no deadline on the server.
  if (waiter.dialect != Dialect::kEmber) return reply(waiter.connection, std::string(1, '\0'));
  reply(waiter.connection, ok(std::string(1, timed_out ? '\1' : '\0')));
}

void StoreState::wake_key_waiters() {
  std::erase_if(key_waiters_, [&](const KeyWaiter& w) {
    if (!has_all(w.keys)) return false;
    wait_done(w, false);
    return true;
  });
}

namespace {

enum class Counter { kOk, kNotANumber, kOutOfRange };

/// Reads a stored counter as PyTorch's servers do (std::stoll): leading white space, an
/// optional sign, then the longest run of decimal digits; what follows is ignored (" 12",
/// "+5", "12abc" are 12, 5, 12; "0x10" is 0). No digits, or more than int64 holds, is no
/// counter (stoll throws).
Counter read_counter(const std::string& text, int64_t& out) {
  const char* p = text.data();
  const char* end = p + text.size();
  while (p != end && (*p == ' ' || (*p >= '\t' && *p <= '\r'))) ++p;
  bool negative = p != end && *p == '-';
  if (p != end && (*p == '-' || *p == '+')) ++p;
  if (p == end || *p < '0' || *p > '9') return Counter::kNotANumber;
  // Digits accumulate as a negative number, whose range holds INT64_MIN.
  int64_t value = 0;
  for (; p != end && *p >= '0' && *p <= '9'; ++p) {
    int digit = *p - '0';
    if (value < (std::numeric_limits<int64_t>::min() + digit) / 10) return Counter::kOutOfRange;
    value = value * 10 - digit;
  }
  if (!negative && value == std::numeric_limits<int64_t>::min()) return Counter::kOutOfRange;
  out = negative ? value : -value;
  return Counter::kOk;
}

}  // namespace

std::string StoreState::add(const std::string& key, int64_t amount, bool wrap) {
  // As PyTorch's stores: a counter is read as std::stoll reads it (read_counter), and an
  // unset key counts from 0. A value stoll refuses is refused, and the stored value is
  // left as it was. A sum past int64 wraps in PyTorch's dialect (as PyTorch's server's
  // signed addition does on every platform it runs on: its reply has no room for an
  // error) and is refused in ember's.
  int64_t current = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    const std::string& text = it->second->bytes;
    Counter read = read_counter(text, current);
    if (read != Counter::kOk) {
      return error(Status::kError,
                   detail::cat("TCPStore: add(", key, ", ", amount, "): the value of key '", key, "' is not an integer",
                               read == Counter::kOutOfRange ? " that int64 holds (" : " (", text.size(), " bytes)"));
    }
  }
  int64_t value = 0;
  if (detail::add_overflows(current, amount, &value) && !wrap) {
    return error(Status::kError,
                 detail::cat("TCPStore: add(", key, ", ", amount, ") overflows int64: the counter is ", current));
  }
  put(key, std::to_string(value));
  std::string out;
  put_i64(out, value);
  return ok(out);
}

void StoreState::handle_torch(int connection, Request& request) {
  auto torch_string = [](const std::string& s) {
    std::string out;
    put_torch_string(out, s);
    return out;
  };
  auto torch_value = [&](const Slot& value) {  // shared, not copied (Note [Replies share values])
    std::string head;
    put_u64(head, value->bytes.size());
    send_(connection, Reply{std::move(head), value});
  };
  auto i64 = [](int64_t v) {
    std::string out;
    put_i64(out, v);
    return out;
  };
  switch (request.command) {
    case Command::Validate: return;
    case Command::Ping: {
      std::string out;
      put_u32(out, static_cast<uint32_t>(request.number));
      return reply(connection, out);
    }
    case Command::Set: put(request.keys[0], std::move(request.value)); return wake_key_waiters();
    case Command::Append: {
      Slot& slot = data_[request.keys[0]];
      if (slot && slot.use_count() == 1) {
        slot->bytes += request.value;  // no reply shares it: in place
      } else {
        std::string bytes = slot ? slot->bytes + request.value : std::move(request.value);
        release(slot);
        slot = make_value(std::move(bytes));
      }
      return wake_key_waiters();
    }
    case Command::CompareSet: {
      // PyTorch's semantics: set when the current value equals `expected` (an unset key
      // matches an empty `expected`); the reply is the value now stored, or `expected`
      // for an unset key that was not set.
      auto it = data_.find(request.keys[0]);
      if (it == data_.end()) {
        if (!request.value.empty()) return reply(connection, torch_string(request.value));
        it = data_.emplace(request.keys[0], make_value(std::move(request.desired))).first;
        torch_value(it->second);
        return wake_key_waiters();
      }
      if (it->second->bytes == request.value) put(request.keys[0], std::move(request.desired));
      torch_value(it->second);
      return wake_key_waiters();
    }
    case Command::Get: {
      auto it = data_.find(request.keys[0]);
      EMBER_CHECK(it != data_.end(), DistributedError, "TCPStore: get of unset key '", request.keys[0], "'");
      return torch_value(it->second);
    }
    case Command::Add: {
      std::string answer = add(request.keys[0], request.number, /*wrap=*/true);
      EMBER_CHECK(answer[0] == static_cast<char>(Status::kOk), DistributedError, answer.substr(1 + sizeof(uint32_t)));
      reply(connection, answer.substr(1));
      return wake_key_waiters();
    }
    case Command::Check:  // READY is 0
      return reply(connection, std::string(1, has_all(request.keys) ? '\0' : '\1'));
    case Command::Wait:
      if (has_all(request.keys)) return reply(connection, std::string(1, '\0'));
      key_waiters_.push_back({connection, request.dialect, std::move(request.keys), Clock::time_point::max()});
      return;
    case Command::CancelWait:  // WAIT_CANCELED is 1
      std::erase_if(key_waiters_, [&](const KeyWaiter& w) { return w.connection == connection; });
      return reply(connection, std::string(1, '\1'));
    case Command::Delete: return reply(connection, i64(erase(request.keys[0]) ? 1 : 0));
    case Command::NumKeys: return reply(connection, i64(static_cast<int64_t>(data_.size())));
    default: detail::fail<DistributedError>("TCPStore: no PyTorch query for ember's command");
  }
}

void StoreState::handle(int connection, Request request) {
  const auto now = Clock::now();
  if (request.dialect != Dialect::kEmber) return handle_torch(connection, request);
  switch (request.command) {
    case Command::Set:
      put(request.keys[0], std::move(request.value));
      reply(connection, ok());
      return wake_key_waiters();
    case Command::Get: {
      auto it = data_.find(request.keys[0]);
      std::string head = ok(std::string(1, it != data_.end() ? '\1' : '\0'));
      if (it == data_.end()) return reply(connection, std::move(head));
      put_u32(head, static_cast<uint32_t>(it->second->bytes.size()));  // a put_string whose bytes are shared
      return send_(connection, Reply{std::move(head), it->second});
    }
    case Command::Add: {
      reply(connection, add(request.keys[0], request.number, /*wrap=*/false));
      return wake_key_waiters();
    }
    case Command::Check: return reply(connection, ok(std::string(1, has_all(request.keys) ? '\1' : '\0')));
    case Command::Wait:
      if (has_all(request.keys)) return reply(connection, ok(std::string(1, '\0')));
      key_waiters_.push_back({connection, request.dialect, std::move(request.keys),
                              detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
    case Command::Delete: return reply(connection, ok(std::string(1, erase(request.keys[0]) ? '\1' : '\0')));
    case Command::NumKeys: {
      std::string out;
      put_i64(out, static_cast<int64_t>(data_.size()));
      return reply(connection, ok(out));
    }
    case Command::Register:
      // Note [Ranks prove their job]
      if (!run_id_.empty() && request.keys[0] != run_id_) {
        return reply(connection, error(Status::kError,
                                       "TCPStore: REGISTER refused: the client did not give this "
                                       "job's run id (TORCHELASTIC_RUN_ID)"));
      }
      members_[connection].rank = static_cast<int>(std::clamp<int64_t>(request.number, -1, 1 << 30));
      return reply(connection, ok());
    case Command::Leave: members_[connection].left = true; return reply(connection, ok());
    case Command::Departed:
      if (!departed_.empty() || request.number <= 0) return reply(connection, departed_reply());
      departure_waiters_.push_back(
          {connection, detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
    default: return reply(connection, error(Status::kClosing, "TCPStore: a PyTorch query on an ember connection"));
  }
}

void StoreState::closed(int connection) {
  auto it = members_.find(connection);
  if (it != members_.end()) {
    if (it->second.rank >= 0 && !it->second.left) {
      departed_.push_back(it->second.rank);
      for (const auto& w : departure_waiters_) {
        if (w.connection != connection) reply(w.connection, departed_reply());
      }
      departure_waiters_.clear();
    }
    members_.erase(it);
  }
  std::erase_if(key_waiters_, [&](const KeyWaiter& w) { return w.connection == connection; });
  std::erase_if(departure_waiters_, [&](const DepartureWaiter& w) { return w.connection == connection; });
}

void StoreState::expire(Clock::time_point now) {
  std::erase_if(key_waiters_, [&](const KeyWaiter& w) {
    if (w.deadline > now) return false;
    wait_done(w, true);
    return true;
  });
  std::erase_if(departure_waiters_, [&](const DepartureWaiter& w) {
    if (w.deadline > now) return false;
    reply(w.connection, departed_reply());
    return true;
  });
}

Clock::time_point StoreState::next_deadline() const {
  auto next = Clock::time_point::max();
  for (const auto& w : key_waiters_) next = std::min(next, w.deadline);
  for (const auto& w : departure_waiters_) next = std::min(next, w.deadline);
  return next;
}

}  // namespace ember::distributed
