// EmulatedStream: one virtual CUDA stream, a FIFO of work run by its own worker thread.
//
// Note [Emulated stream queue]
// The host enqueues under a mutex and returns at once; it notifies the condition
// variable only when the worker is asleep, so a busy stream costs the host one
// uncontended lock and a deque push per item. The worker takes the whole queue in one
// swap, runs it without the lock, and publishes each completed item on the stream's
// Timeline. Destruction lets the worker drain what is queued, then joins it;
// release() (cudaStreamDestroy) returns at once and the worker deletes the stream once
// its queue has run.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "backends/emulated/sticky_error.h"
#include "backends/emulated/work_item.h"
#include "runtime/backend.h"

namespace ember::detail::emulated {

class EmulatedStream final : public BackendStream {
 public:
  EmulatedStream(int device, int priority, StickyError& error, bool launch_blocking);
  ~EmulatedStream() override;
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  int device() const noexcept { return device_; }
  int priority() const noexcept { return priority_; }
  const std::shared_ptr<Timeline>& timeline() const noexcept { return timeline_; }

  /// Queues `item` and returns its sequence number (1-based).
  uint64_t enqueue(WorkItem item);
  /// Number of items queued so far.
  uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }
  bool idle() const noexcept { return timeline_->reached(submitted()); }
  /// Blocks until everything queued so far has run (errors are the caller's to raise).
  void drain() { timeline_->wait_for(submitted()); }
  /// Destroys the stream without waiting: the worker runs what is queued, then deletes
  /// the stream. Nothing may be enqueued after this call.
  void release();

 private:
  /// Runs the queue until stopped; true when the worker must delete the stream.
  bool run_worker();
  void execute(WorkItem& item);

  const int device_;
  const int priority_;
  StickyError& error_;
  const bool launch_blocking_;
  std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<WorkItem> queue_;         // guarded by mutex_
  bool worker_asleep_ = false;         // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  bool self_delete_ = false;           // guarded by mutex_
  std::atomic<uint64_t> submitted_{0};  // written under mutex_
  std::thread worker_;
};

}  // namespace ember::detail::emulated
