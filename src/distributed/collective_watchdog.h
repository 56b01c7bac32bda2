// CollectiveWatchdog: turns a collective that does not finish within the group's timeout
// into a DistributedError instead of a hang, as ProcessGroupNCCL's watchdog thread does.
//
// The group registers each collective it enqueues with a completion query (an event
// query) and a way to fail its Work. A thread polls the pending ones; the first that runs
// past the timeout calls `abort` once (the NCCL group aborts its communicator, which
// makes the stuck kernels return), and every pending and later collective fails with the
// error naming the one that timed out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ember::detail::distributed {

class CollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// `abort(message)` runs once, on the watchdog's thread, at the first timeout.
  CollectiveWatchdog(int rank, std::chrono::milliseconds timeout, std::function<void(const std::string&)> abort);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  /// Watches collective number `sequence` ("all_reduce", ...) from now on. `completed`
  /// is polled from the watchdog's thread; `fail` receives the DistributedError. After a
  /// timeout, a collective is failed at once.
  void watch(uint64_t sequence, const char* name, std::function<bool()> completed,
             std::function<void(const std::exception_ptr&)> fail);

  /// The timeout's message once one happened, else "".
  std::string failure() const;

 private:
  struct Entry {
    uint64_t sequence;
    const char* name;
    Clock::time_point start;
    std::function<bool()> completed;
    std::function<void(const std::exception_ptr&)> fail;
  };

  void run();
  std::exception_ptr error_locked() const;

  int rank_;
  std::chrono::milliseconds timeout_;
  std::function<void(const std::string&)> abort_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> pending_;
  std::string failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ember::detail::distributed
