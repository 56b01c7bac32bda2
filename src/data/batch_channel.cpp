// BatchChannel: see Note [DataLoader threads].
#include "data/batch_channel.h"

namespace ember::data::detail {

void BatchChannel::close() {
  {
    std::lock_guard lock(mutex_);
    closed_.store(true, std::memory_order_release);
    loaded_.clear();
    ready_.clear();
  }
  loaded_cv_.notify_all();
  ready_cv_.notify_all();
}

void BatchChannel::deliver(size_t index, Outcome outcome) {
  {
    std::lock_guard lock(mutex_);
    if (closed()) return;
    (pin_ ? loaded_ : ready_).emplace(index, std::move(outcome));
  }
  (pin_ ? loaded_cv_ : ready_cv_).notify_one();
}

std::optional<std::pair<size_t, Outcome>> BatchChannel::take_loaded() {
  std::unique_lock lock(mutex_);
  loaded_cv_.wait(lock, [&] { return closed() || !loaded_.empty(); });
  if (closed()) return std::nullopt;
  auto node = loaded_.extract(loaded_.begin());
  return std::make_pair(node.key(), std::move(node.mapped()));
}

void BatchChannel::put_ready(size_t index, Outcome outcome) {
  {
    std::lock_guard lock(mutex_);
    if (closed()) return;
    ready_.emplace(index, std::move(outcome));
  }
  ready_cv_.notify_one();
}

std::optional<Outcome> BatchChannel::take_ready(size_t index, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto arrived = [&] { return closed() || ready_.count(index) != 0; };
  if (timeout.count() > 0) {
    if (!ready_cv_.wait_for(lock, timeout, arrived)) return std::nullopt;
  } else {
    ready_cv_.wait(lock, arrived);
  }
  if (closed()) return std::nullopt;
  auto node = ready_.extract(index);
  return std::move(node.mapped());
}

}  // namespace ember::data::detail
