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

void StoreState::wake_key_waiters() {
  std::erase_if(key_waiters_, [&](const KeyWaiter& w) {
    if (!has_all(w.keys)) return false;
    send_(w.connection, ok(std::string(1, '\0')));
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

void StoreState::handle(int connection, Request request) {
  const auto now = Clock::now();
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
          {connection, std::move(request.keys), detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
    case Command::Delete:
      return send_(connection, ok(std::string(1, data_.erase(request.keys[0]) != 0 ? '\1' : '\0')));
    case Command::NumKeys: {
      std::string out;
      put_i64(out, static_cast<int64_t>(data_.size()));
      return send_(connection, ok(out));
    }
    case Command::Register:
      members_[connection].rank = static_cast<int>(std::clamp<int64_t>(request.number, -1, 1 << 30));
      return send_(connection, ok());
    case Command::Leave:
      members_[connection].left = true;
      return send_(connection, ok());
    case Command::Departed:
      if (!departed_.empty() || request.number <= 0) return send_(connection, departed_reply());
      departure_waiters_.push_back({connection, detail::deadline_after(std::chrono::milliseconds(request.number), now)});
      return;
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
    send_(w.connection, ok(std::string(1, '\1')));
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
