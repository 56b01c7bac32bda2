// Timeline: how far an emulated stream's worker has got, and a way to wait for it.
//
// Every item queued on a stream gets the next sequence number; the worker publishes the
// number of items it has completed. Anyone (host threads, other streams' workers) waits
// for "completed >= seq". The timeline is shared (shared_ptr) by its stream and by every
// event recorded on it, so waiting on an event outlives the stream that recorded it.
//
// Waking is cheap when nobody waits: the worker stores `completed_` and only takes the
// mutex to notify when `waiters_` is non-zero. Both sides use sequentially consistent
// operations (store completed / load waiters against increment waiters / load completed),
// so either the worker sees the waiter or the waiter sees the new count: no lost wake-up.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace ember::detail::emulated {

class Timeline {
 public:
  /// Number of items completed so far.
  uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }
  bool reached(uint64_t seq) const noexcept { return completed() >= seq; }

  /// How long a waiter or an idle worker polls before it sleeps: most waits end within
  /// microseconds, and a sleep costs a wake-up of tens of microseconds (CUDA's default
  /// synchronisation also spins, then yields).
  static constexpr std::chrono::microseconds kSpin{50};

  /// Polls `ready` for up to kSpin, yielding the core between polls.
  template <typename Ready>
  static bool spin_until(Ready ready) {
    auto deadline = std::chrono::steady_clock::now() + kSpin;
    while (!ready()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  /// Blocks until item `seq` has completed.
  void wait_for(uint64_t seq) {
    if (spin_until([&] { return reached(seq); })) return;
    waiters_.fetch_add(1);
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return completed_.load() >= seq; });
    }
    waiters_.fetch_sub(1);
  }

  /// Worker only: item `seq` (the next one) has completed.
  void advance(uint64_t seq) {
    completed_.store(seq);
    if (waiters_.load() > 0) {
      std::lock_guard lock(mutex_);
      cv_.notify_all();
    }
  }

 private:
  std::atomic<uint64_t> completed_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace ember::detail::emulated
