// WorkerPool: see the header and Note [DataLoader threads].
//
// Note [Workers left behind]
// PyTorch's DataLoader raises at its timeout and, on leaving the loop, terminates its
// worker processes whatever they are doing. A thread stuck in Dataset::get() cannot be
// stopped, and joining it would hold up the loop's exit (and the loader's destructor) for
// as long as the get() hangs, forever for a read that never returns. So once the
// consumer's wait for a batch has timed out (the pool is stalled, until a batch arrives
// again), stopping the pool joins the idle workers and detaches those still loading a
// batch, and says so once on stderr. A detached worker touches only what it co-owns:
// the Shared state below (queues, mutex, the dataset's shared_ptr) and its task's channel.
// When its get() returns it sees the channel closed, calls get() no more, drops the batch
// and exits. The dataset itself is co-owned when the loader was given a shared_ptr;
// given a reference, its owner must keep it (and whatever its get() uses) alive until the
// stuck get() returns. The loader's own state may be gone by then.
#include "data/worker_pool.h"

#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

#include "data/collate.h"

namespace ember::data::detail {
namespace {

// The worker threads left behind that have not exited yet. Never destroyed: such a
// thread may outlive static destruction.
struct LeftBehind {
  std::mutex mutex;
  std::condition_variable exited;
  size_t running = 0;
};

LeftBehind& left_behind() {
  static auto* registry = new LeftBehind();
  return *registry;
}

void warn_left_behind(const std::vector<size_t>& workers) {
  std::ostringstream out;
  out << "UserWarning: DataLoader timed out and left worker thread" << (workers.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < workers.size(); ++i) out << (i > 0 ? ", " : "") << workers[i];
  out << " behind, still loading a batch; " << (workers.size() > 1 ? "each" : "it")
      << " exits once its Dataset::get() call returns, and the dataset must stay alive until then.\n";
  std::cerr << out.str();
}

}  // namespace

struct WorkerPool::Shared {
  Shared(std::shared_ptr<const Dataset> dataset, size_t workers)
      : dataset(std::move(dataset)), queues(workers), wakeups(workers), busy(workers), left_behind(workers) {}

  const std::shared_ptr<const Dataset> dataset;
  std::mutex mutex;
  std::vector<std::deque<Task>> queues;
  std::vector<std::condition_variable> wakeups;  // one per worker
  std::vector<char> busy;                        // inside load_batch()
  std::vector<char> left_behind;                 // detached by stop()
  bool stop = false;
};

Example load_batch(const Dataset& dataset, const std::vector<size_t>& indices, const BatchChannel* channel) {
  std::vector<Example> items;
  items.reserve(indices.size());
  for (size_t index : indices) {
    if (channel != nullptr && channel->closed()) return {};
    items.push_back(dataset.get(index));
  }
  if (channel != nullptr && channel->closed()) return {};
  return collate(items);
}

WorkerPool::WorkerPool(std::shared_ptr<const Dataset> dataset, int num_workers)
    : shared_(std::make_shared<Shared>(std::move(dataset), static_cast<size_t>(num_workers))), size_(num_workers) {
  threads_.reserve(static_cast<size_t>(num_workers));
  try {
    for (int w = 0; w < num_workers; ++w)
      threads_.emplace_back(
          [](std::shared_ptr<Shared> shared, int worker) {
            bool detached = run(*shared, worker);
            shared.reset();  // the last owner frees the state, and the dataset if it holds the last share
            if (!detached) return;
            LeftBehind& registry = left_behind();
            {
              std::lock_guard lock(registry.mutex);
              --registry.running;
            }
            registry.exited.notify_all();
          },
          shared_, w);
  } catch (...) {
    stop();
    throw;
  }
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() noexcept {
  std::vector<size_t> behind;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stop = true;
    if (stalled()) {
      for (size_t w = 0; w < threads_.size(); ++w) {
        if (!shared_->busy[w]) continue;
        shared_->left_behind[w] = 1;
        behind.push_back(w);
      }
      if (!behind.empty()) {
        // Counted before any of them can exit and uncount itself.
        std::lock_guard registry_lock(left_behind().mutex);
        left_behind().running += behind.size();
      }
    }
  }
  for (auto& wakeup : shared_->wakeups) wakeup.notify_all();
  for (size_t w = 0, b = 0; w < threads_.size(); ++w) {
    if (b < behind.size() && behind[b] == w) {
      threads_[w].detach();
      ++b;
    } else if (threads_[w].joinable()) {
      threads_[w].join();
    }
  }
  threads_.clear();
  if (!behind.empty()) {
    try {
      warn_left_behind(behind);
    } catch (...) {  // a warning that cannot be written is not worth terminating for
    }
  }
}

void WorkerPool::submit(int worker, Task task) {
  auto w = static_cast<size_t>(worker);
  {
    std::lock_guard lock(shared_->mutex);
    shared_->queues[w].push_back(std::move(task));
  }
  shared_->wakeups[w].notify_one();
}

bool WorkerPool::run(Shared& shared, int worker) {
  auto w = static_cast<size_t>(worker);
  const std::string where = "in DataLoader worker process " + std::to_string(worker);
  for (;;) {
    Task task;
    {
      std::unique_lock lock(shared.mutex);
      shared.wakeups[w].wait(lock, [&] { return shared.stop || !shared.queues[w].empty(); });
      if (shared.stop) return shared.left_behind[w] != 0;
      task = std::move(shared.queues[w].front());
      shared.queues[w].pop_front();
      if (task.channel->closed()) continue;
      shared.busy[w] = 1;
    }
    Outcome outcome;
    try {
      outcome.batch = load_batch(*shared.dataset, task.indices, task.channel.get());
    } catch (...) {
      outcome.error = std::current_exception();
      outcome.where = where;
    }
    {
      std::lock_guard lock(shared.mutex);
      shared.busy[w] = 0;
    }
    task.channel->deliver(task.index, std::move(outcome));
  }
}

void wait_for_left_behind_workers() {
  LeftBehind& registry = left_behind();
  std::unique_lock lock(registry.mutex);
  registry.exited.wait(lock, [&] { return registry.running == 0; });
}

}  // namespace ember::data::detail
