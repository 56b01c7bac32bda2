#include "distributed/tcp_store_state.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "distributed/deadline.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::net::Clock;
using namespace detail::store_protocol;

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
  if (waiter.dialect != Dialect::kEmber) return send_(waiter.connection, std::string(1, '\0'));
  send_(waiter.connection, ok(std::string(1, timed_out ? '\1' : '\0')));
}

void StoreState::wake_key_waiters() {
  std::erase_if(key_waiters_, [&](const KeyWaiter& w) {
    if (!has_all(w.keys)) return false;
    wait_done(w, false);
    return true;
  });
}

std::string StoreState::add(const std::string& key, int64_t amount) {
  // As PyTorch's stores: a counter is a decimal string, and an unset key counts from 0.
  // A value that is not a whole int64 and a sum that does not fit are refused, not
  // read as 0 or wrapped; the stored value is left as it was.
  int64_t current = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      return error(Status::kError, detail::cat("TCPStore: add(", key, ", ", amount, "): the value of key '", key,
                                               "' is not an integer (", text.size(), " bytes)"));
    }
  }
  if ((amount > 0 && current > std::numeric_limits<int64_t>::max() - amount) ||
      (amount < 0 && current < std::numeric_limits<int64_t>::min() - amount)) {
    return error(Status::kError, detail::cat("TCPStore: add(", key, ", ", amount, ") overflows int64: the counter is ",
                                             current));
  }
  int64_t value = current + amount;
  data_[key] = std::to_string(value);
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
      return send_(connection, out);
    }
    case Command::Set:
      data_[request.keys[0]] = std::move(request.value);
      return wake_key_waiters();
    case Command::Append:
      data_[request.keys[0]] += request.value;
      return wake_key_waiters();
    case Command::CompareSet: {
      // PyTorch's semantics: set when the current value equals `expected` (an unset key
      // matches an empty `expected`); the reply is the value now stored, or `expected`
      // for an unset key that was not set.
      auto it = data_.find(request.keys[0]);
      if (it == data_.end()) {
        if (!request.value.empty()) return send_(connection, torch_string(request.value));
        it = data_.emplace(request.keys[0], std::move(request.desired)).first;
        send_(connection, torch_string(it->second));
        return wake_key_waiters();
      }
      if (it->second == request.value) it->second = std::move(request.desired);
      send_(connection, torch_string(it->second));
      return wake_key_waiters();
    }
    case Command::Get: {
      auto it = data_.find(request.keys[0]);
      EMBER_CHECK(it != data_.end(), DistributedError, "TCPStore: get of unset key '", request.keys[0], "'");
      return send_(connection, torch_string(it->second));
    }
    case Command::Add: {
      std::string reply = add(request.keys[0], request.number);
      EMBER_CHECK(reply[0] == static_cast<char>(Status::kOk), DistributedError, reply.substr(1 + sizeof(uint32_t)));
      send_(connection, reply.substr(1));
      return wake_key_waiters();
    }
    case Command::Check:  // READY is 0
      return send_(connection, std::string(1, has_all(request.keys) ? '\0' : '\1'));
    case Command::Wait:
      if (has_all(request.keys)) return send_(connection, std::string(1, '\0'));
      key_waiters_.push_back({connection, request.dialect, std::move(request.keys), Clock::time_point::max()});
      return;
    case Command::CancelWait:  // WAIT_CANCELED is 1
      std::erase_if(key_waiters_, [&](const KeyWaiter& w) { return w.connection == connection; });
      return send_(connection, std::string(1, '\1'));
    case Command::Delete: return send_(connection, i64(data_.erase(request.keys[0]) != 0 ? 1 : 0));
    case Command::NumKeys: return send_(connection, i64(static_cast<int64_t>(data_.size())));
    default: detail::fail<DistributedError>("TCPStore: no PyTorch query for ember's command");
  }
}

void StoreState::handle(int connection, Request request) {
  const auto now = Clock::now();
  if (request.dialect != Dialect::kEmber) return handle_torch(connection, request);
  switch (request.command) {
    case Command::Set:
      data_[request.keys[0]] = std::move(request.value);
      send_(connection, ok());
      return wake_key_waiters();
    case Command::Get: {
      auto it = data_.find(request.keys[0]);
      std::string out(1, it != data_.end() ? '\1' : '\0');
      if (it != data_.end()) put_string(out, it->second);
      return send_(connection, ok(out));
    }
    case Command::Add: {
      send_(connection, add(request.keys[0], request.number));
      return wake_key_waiters();
    }
    case Command::Check:
      return send_(connection, ok(std::string(1, has_all(request.keys) ? '\1' : '\0')));
    case Command::Wait:
      if (has_all(request.keys)) return send_(connection, ok(std::string(1, '\0')));
      key_waiters_.push_back(
          {connection, request.dialect, std::move(request.keys), detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
    case Command::Delete:
      return send_(connection, ok(std::string(1, data_.erase(request.keys[0]) != 0 ? '\1' : '\0')));
    case Command::NumKeys: {
      std::string out;
      put_i64(out, static_cast<int64_t>(data_.size()));
      return send_(connection, ok(out));
    }
    case Command::Register:
      // Note [Ranks prove their job]
      if (!run_id_.empty() && request.keys[0] != run_id_) {
        return send_(connection, error(Status::kError, "TCPStore: REGISTER refused: the client did not give this "
                                                       "job's run id (TORCHELASTIC_RUN_ID)"));
      }
      members_[connection].rank = static_cast<int>(std::clamp<int64_t>(request.number, -1, 1 << 30));
      return send_(connection, ok());
    case Command::Leave:
      members_[connection].left = true;
      return send_(connection, ok());
    case Command::Departed:
      if (!departed_.empty() || request.number <= 0) return send_(connection, departed_reply());
      departure_waiters_.push_back({connection, detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
    default: return send_(connection, error(Status::kClosing, "TCPStore: a PyTorch query on an ember connection"));
  }
}

void StoreState::closed(int connection) {
  auto it = members_.find(connection);
  if (it != members_.end()) {
    if (it->second.rank >= 0 && !it->second.left) {
      departed_.push_back(it->second.rank);
      for (const auto& w : departure_waiters_) {
        if (w.connection != connection) send_(w.connection, departed_reply());
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
    send_(w.connection, departed_reply());
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
