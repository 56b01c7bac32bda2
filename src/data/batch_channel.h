// BatchChannel: where one epoch's loaded batches meet its consumer.
//
// Note [DataLoader threads]
// One epoch (an EpochRun) has one channel. Who calls what:
// - worker threads (WorkerPool) call deliver() with each batch they loaded (or the error
//   they caught), in any order;
// - with pin_memory, the pin-memory thread calls take_loaded() for the lowest-numbered
//   loaded batch, pins it, and hands it on with put_ready(); without, deliver() puts
//   batches straight into the ready set;
// - the consuming thread calls take_ready(i) for batch i = 0, 1, 2, ... and so restores
//   sampler order, whatever order the workers finished in.
// close() ends the epoch: waiters wake at once, later deliveries are dropped, and workers
// skip the epoch's queued batches (they poll closed() between items). Every wait is on a
// condition variable with a predicate that includes `closed_`, so shutdown never waits
// for a timeout to expire.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "ember/data.h"

namespace ember::data::detail {

/// A loaded batch, or the error that stopped it and where it was caught.
struct Outcome {
  Example batch;
  std::exception_ptr error;
  std::string where;  // "in DataLoader worker process N", "in pin memory thread for device D"
};

class BatchChannel {
 public:
  explicit BatchChannel(bool pin) : pin_(pin) {}

  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  /// Wakes every waiter; later deliveries are dropped.
  void close();

  /// Worker threads: batch `index` is loaded (or failed).
  void deliver(size_t index, Outcome outcome);
  /// Pin-memory thread: the lowest-numbered loaded batch; nullopt once closed.
  std::optional<std::pair<size_t, Outcome>> take_loaded();
  /// Pin-memory thread: batch `index` is pinned (or failed).
  void put_ready(size_t index, Outcome outcome);
  /// Consumer: batch `index`, waiting at most `timeout` (0: no limit). nullopt on timeout
  /// or once closed.
  std::optional<Outcome> take_ready(size_t index, std::chrono::milliseconds timeout);

 private:
  const bool pin_;
  std::atomic<bool> closed_{false};
  std::mutex mutex_;
  std::condition_variable loaded_cv_, ready_cv_;
  std::map<size_t, Outcome> loaded_;  // awaiting the pin-memory thread
  std::map<size_t, Outcome> ready_;   // awaiting the consumer
};

}  // namespace ember::data::detail
