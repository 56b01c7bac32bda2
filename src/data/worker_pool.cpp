// WorkerPool: see the header and Note [DataLoader threads].
#include "data/worker_pool.h"

#include <string>

#include "data/collate.h"

namespace ember::data::detail {

Example load_batch(const Dataset& dataset, const std::vector<size_t>& indices, const BatchChannel* channel) {
  std::vector<Example> items;
  items.reserve(indices.size());
  for (size_t index : indices) {
    if (channel != nullptr && channel->closed()) return {};
    items.push_back(dataset.get(index));
  }
  return collate(items);
}

WorkerPool::WorkerPool(const Dataset& dataset, int num_workers) : dataset_(dataset) {
  queues_.resize(static_cast<size_t>(num_workers));
  for (int w = 0; w < num_workers; ++w) wakeups_.push_back(std::make_unique<std::condition_variable>());
  threads_.reserve(static_cast<size_t>(num_workers));
  try {
    for (int w = 0; w < num_workers; ++w) threads_.emplace_back([this, w] { run(w); });
  } catch (...) {
    stop_and_join();
    throw;
  }
}

WorkerPool::~WorkerPool() { stop_and_join(); }

void WorkerPool::stop_and_join() noexcept {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  for (auto& wakeup : wakeups_) wakeup->notify_all();
  for (auto& thread : threads_)
    if (thread.joinable()) thread.join();
  threads_.clear();
}

void WorkerPool::submit(int worker, Task task) {
  auto w = static_cast<size_t>(worker);
  {
    std::lock_guard lock(mutex_);
    queues_[w].push_back(std::move(task));
  }
  wakeups_[w]->notify_one();
}

void WorkerPool::run(int worker) {
  auto w = static_cast<size_t>(worker);
  const std::string where = "in DataLoader worker process " + std::to_string(worker);
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      wakeups_[w]->wait(lock, [&] { return stop_ || !queues_[w].empty(); });
      if (stop_) return;
      task = std::move(queues_[w].front());
      queues_[w].pop_front();
    }
    if (task.channel->closed()) continue;
    Outcome outcome;
    try {
      outcome.batch = load_batch(dataset_, task.indices, task.channel.get());
    } catch (...) {
      outcome.error = std::current_exception();
      outcome.where = where;
    }
    task.channel->deliver(task.index, std::move(outcome));
  }
}

}  // namespace ember::data::detail
