// HostWork: a Work completed by a host thread (the gloo group's worker), waited on by
// blocking the caller.
#pragma once

#include <condition_variable>
#include <mutex>

#include "ember/distributed.h"

namespace ember::detail::distributed {

class HostWork final : public ember::distributed::Work {
 public:
  explicit HostWork(std::vector<Tensor> outputs) : Work(std::move(outputs)) {}

  bool is_completed() override {
    std::lock_guard lock(mutex_);
    return done_;
  }
  void wait() override {
    {
      std::unique_lock lock(mutex_);
      done_cv_.wait(lock, [&] { return done_; });
    }
    if (auto error = exception()) std::rethrow_exception(error);
  }
  /// Marks the work finished (with `error` when it failed) and wakes the waiters.
  void finish(const std::exception_ptr& error) {
    if (error) set_exception(error);
    std::lock_guard lock(mutex_);
    done_ = true;
    done_cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

}  // namespace ember::detail::distributed
