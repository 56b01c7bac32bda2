// WorkerPool: the DataLoader's worker threads (num_workers of them).
//
// Each worker has its own queue of batches to load, filled round-robin by the consuming
// thread (batch i of an epoch goes to worker i % num_workers, as PyTorch assigns them), and
// delivers each loaded batch to the task's channel (Note [DataLoader threads]). An exception
// from the dataset or from collation is caught and delivered in the batch's place. A pool
// serves one epoch, or every epoch with persistent_workers; tasks of a closed channel are
// skipped. The destructor stops and joins the workers: one loading an item finishes that
// item first, unless the pool is stalled (Note [Workers left behind]).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "data/batch_channel.h"
#include "ember/data.h"

namespace ember::data::detail {

/// Loads the items at `indices` and collates them; stops early (returning an empty batch)
/// once `channel` is closed.
Example load_batch(const Dataset& dataset, const std::vector<size_t>& indices, const BatchChannel* channel);

class WorkerPool {
 public:
  struct Task {
    std::shared_ptr<BatchChannel> channel;
    size_t index = 0;  // the batch's position in its epoch
    std::vector<size_t> indices;
  };

  /// The workers share the ownership of `dataset` (Note [Workers left behind]).
  WorkerPool(std::shared_ptr<const Dataset> dataset, int num_workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const noexcept { return size_; }
  /// Queues `task` for `worker`.
  void submit(int worker, Task task);
  /// Set when the consumer's wait for a batch timed out, cleared when a batch arrives: a
  /// stalled pool leaves the workers still loading behind instead of joining them.
  void set_stalled(bool stalled) noexcept { stalled_.store(stalled, std::memory_order_relaxed); }
  bool stalled() const noexcept { return stalled_.load(std::memory_order_relaxed); }

 private:
  struct Shared;  // what the worker threads touch; they co-own it
  /// A worker's loop; true when the pool left it behind.
  static bool run(Shared& shared, int worker);
  void stop() noexcept;

  std::shared_ptr<Shared> shared_;
  int size_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stalled_{false};
};

/// Blocks until every worker thread a stalled pool left behind has exited (and dropped its
/// share of the dataset). For tests: a program need not wait for them.
void wait_for_left_behind_workers();

}  // namespace ember::data::detail
