#include "distributed/collective_watchdog.h"

#include <algorithm>

#include "ember/errors.h"
#include "runtime/backend.h"

namespace ember::detail::distributed {

CollectiveWatchdog::CollectiveWatchdog(int rank, std::chrono::milliseconds timeout,
                                       std::function<void(const std::string&)> abort)
    : rank_(rank), timeout_(timeout), abort_(std::move(abort)) {
  thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::watch(uint64_t sequence, const char* name, std::function<bool()> completed,
                               std::function<void(const std::exception_ptr&)> fail) {
  std::unique_lock lock(mutex_);
  if (!failure_.empty()) {
    std::exception_ptr error = error_locked();
    lock.unlock();
    fail(error);
    return;
  }
  pending_.push_back(Entry{sequence, name, Clock::now(), std::move(completed), std::move(fail)});
}

std::string CollectiveWatchdog::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::exception_ptr CollectiveWatchdog::error_locked() const {
  return std::make_exception_ptr(DistributedError(failure_));
}

void CollectiveWatchdog::run() {
  // The watchdog queries the collectives' events while a user may be capturing a graph on
  // another thread: in the default Global mode a query would invalidate that capture, so
  // this thread is Relaxed (as PyTorch's NCCL watchdog).
  if (Backend* backend = backend_or_null()) backend->exchange_capture_mode(CaptureMode::Relaxed);
  // Polls as PyTorch's watchdog does (every 100 ms), more often for short timeouts.
  auto poll =
      std::clamp<std::chrono::milliseconds>(timeout_ / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    cv_.wait_for(lock, poll, [&] { return stopping_; });
    if (stopping_ || !failure_.empty()) continue;
    auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = false;
      try {
        done = it->completed();
      } catch (...) {
        it->fail(std::current_exception());
        it = pending_.erase(it);
        continue;
      }
      if (done) {
        it = pending_.erase(it);
        continue;
      }
      if (now - it->start > timeout_) {
        auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->start).count();
        failure_ =
            cat("[Rank ", rank_, "] Watchdog caught collective operation timeout: ", it->name, " (collective #",
                it->sequence, ", Timeout(ms)=", timeout_.count(), ") ran for ", ran, " milliseconds before timing out");
        break;
      }
      ++it;
    }
    if (failure_.empty()) continue;
    std::deque<Entry> failed;
    failed.swap(pending_);
    std::string message = failure_;
    lock.unlock();
    abort_(message);
    auto error = std::make_exception_ptr(DistributedError(message));
    for (Entry& entry : failed) entry.fail(error);
    lock.lock();
  }
}

}  // namespace ember::detail::distributed
