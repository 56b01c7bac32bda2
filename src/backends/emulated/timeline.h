// Timeline: how far an emulated stream's worker has got, and a way to wait for it.
//
// Every item queued on a stream gets the next sequence number; the worker publishes the
// number of items it has completed. Anyone (host threads, other streams' workers) waits
// for "completed >= seq". The timeline is shared (shared_ptr) by its stream and by every
// event recorded on it, so waiting on an event outlives the stream that recorded it.
//
// Waking is cheap when nobody waits, and wakes a sleeper only when what it waits for has
// happened: a waiter that sleeps lowers `wake_at_` to the position it waits for, and the
// worker, after storing `completed_`, takes the mutex to notify only when it has reached
// `wake_at_`. (Notifying at every item while anyone slept made a host that had queued far
// ahead, then slept in a synchronize, cost the worker a system call per item, and the host
// a futile wake-up each time.) Both sides use sequentially consistent operations (store
// completed / load wake_at against store wake_at / load completed), so either the worker
// sees the waiter's position or the waiter sees the new count: no lost wake-up. Woken
// waiters whose position has not been reached lower `wake_at_` again before sleeping.
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
    std::unique_lock lock(mutex_);
    while (completed_.load() < seq) {
      if (seq < wake_at_.load()) wake_at_.store(seq);  // written under the mutex only
      if (completed_.load() >= seq) break;
      cv_.wait(lock);
    }
  }

  /// Worker only: item `seq` (the next one) has completed.
  void advance(uint64_t seq) {
    completed_.store(seq);
    if (wake_at_.load() <= seq) [[unlikely]] {
      std::lock_guard lock(mutex_);
      wake_at_.store(kNobody);
      cv_.notify_all();
    }
  }

 private:
  static constexpr uint64_t kNobody = UINT64_MAX;
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> wake_at_{kNobody};  // the lowest position a sleeping waiter waits for
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace ember::detail::emulated
