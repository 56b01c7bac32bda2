// Datasets for the DataLoader tests: items that report who loaded them, and a gate that
// lets a test script the order in which workers finish (no sleeps).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ember/ember.h"

namespace ember::testing {

/// Item i is {tensor([i]) as float32, i as an int64 scalar}; `hook(i)` runs first (it may
/// block or throw). Records each index fetched and the threads that fetched.
class ProbeDataset : public data::Dataset {
 public:
  explicit ProbeDataset(size_t size, std::function<void(size_t)> hook = {}) : size_(size), hook_(std::move(hook)) {}
  size_t size() const override { return size_; }
  data::Example get(size_t index) const override {
    {
      std::lock_guard lock(mutex_);
      started_.push_back(index);
      threads_.insert(std::this_thread::get_id());
    }
    cv_.notify_all();
    if (hook_) hook_(index);
    return {full({1}, static_cast<double>(index), kFloat32), tensor(static_cast<int64_t>(index))};
  }
  /// Waits (at most 30 s, a test failure rather than a hang) until get(index) has started.
  bool wait_started(size_t index) const {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] {
      for (size_t i : started_)
        if (i == index) return true;
      return false;
    });
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }
  size_t calls() const {
    std::lock_guard lock(mutex_);
    return started_.size();
  }

 private:
  size_t size_;
  std::function<void(size_t)> hook_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  mutable std::vector<size_t> started_;
  mutable std::set<std::thread::id> threads_;
};

/// A latch: wait() blocks until open().
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

/// The targets of every batch of one epoch, batch by batch.
inline std::vector<std::vector<int64_t>> epoch_targets(data::DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const data::Example& batch : loader) out.push_back(batch.target.to_vector<int64_t>());
  return out;
}

}  // namespace ember::testing
