// HostWork: a Work completed by a host thread (the gloo group's worker), waited on by
// blocking the caller; a collective on cuda tensors also orders the caller's current
// stream after the end of its stream work (Note [Collectives as stream work]).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>

#include "ember/cuda.h"
#include "ember/distributed.h"
#include "ember/stream.h"

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
    if (end_) cuda::current_stream(device_).wait_event(*end_);
  }
  /// The end of the collective's work on a stream of `device`; before finish().
  void set_end(cuda::Event end, int device) {
    std::lock_guard lock(mutex_);
    end_ = std::move(end);
    device_ = device;
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
  std::optional<cuda::Event> end_;  // set before done_
  int device_ = -1;
};

}  // namespace ember::detail::distributed
