// WorkerPool: the DataLoader's worker threads (num_workers of them).
//
// Each worker has its own queue of batches to load, filled round-robin by the consuming
// thread (batch i of an epoch goes to worker i % num_workers, as PyTorch assigns them), and
// delivers each loaded batch to the task's channel (Note [DataLoader threads]). An exception
// from the dataset or from collation is caught and delivered in the batch's place. A pool
// serves one epoch, or every epoch with persistent_workers; tasks of a closed channel are
// skipped. The destructor stops and joins the workers: one loading an item finishes that
// item first.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
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

  WorkerPool(const Dataset& dataset, int num_workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const noexcept { return static_cast<int>(queues_.size()); }
  /// Queues `task` for `worker`.
  void submit(int worker, Task task);

 private:
  void run(int worker);
  void stop_and_join() noexcept;

  const Dataset& dataset_;
  std::mutex mutex_;
  std::vector<std::deque<Task>> queues_;
  std::vector<std::unique_ptr<std::condition_variable>> wakeups_;  // one per worker
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ember::data::detail
