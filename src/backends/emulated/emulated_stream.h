// EmulatedStream: one virtual CUDA stream, a FIFO of work run by its own worker thread.
//
// Note [Emulated stream queue]
// The host enqueues under a mutex and returns at once; it notifies the condition
// variable only when the worker is asleep, so a busy stream costs the host one
// uncontended lock per item. The worker takes the whole queue in one step, runs it
// without the lock, and publishes each completed item on the stream's Timeline.
// Destruction lets the worker drain what is queued, then joins it; release()
// (cudaStreamDestroy) returns at once and the worker deletes the stream once its queue
// has run.
//
// Note [Emulated queue pool]
// Queue entries are WorkNodes owned by the stream and recycled, never freed while it
// lives: the worker hands the nodes it has run back to the host (the `done_` list), and
// the host refills one in place. A kernel's arguments are copy-assigned over the
// previous launch's, so their vectors keep their capacity: once the stream has seen its
// deepest queue and its widest launches, enqueueing allocates nothing, and the worker
// neither allocates nor frees. Everything an entry owns is released on the host, when
// it refills or recycles the node (a pageable copy's staging buffer, an event's mark, a
// kernel's payload), except a host function's closure, which the worker destroys right
// after running it so that what it captured is released before its completion is
// visible (cudaLaunchHostFunc is a test hook here, not an op path). Before, each launch
// allocated its item on the host and freed it on the worker, and the two threads
// contended for glibc's arena lock on every op.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backends/emulated/sticky_error.h"
#include "backends/emulated/work_item.h"
#include "runtime/backend.h"

namespace ember::detail::emulated {

struct EmulatedCapture;

class EmulatedStream final : public BackendStream {
 public:
  EmulatedStream(int device, int priority, StickyError& error, bool launch_blocking);
  ~EmulatedStream() override;
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  int device() const noexcept { return device_; }
  int priority() const noexcept { return priority_; }
  const std::shared_ptr<Timeline>& timeline() const noexcept { return timeline_; }

  /// The capture this stream's work goes to, or nullptr (Note [Emulated stream capture]);
  /// what it points to is read and changed only under the backend's Captures mutex.
  EmulatedCapture* capture() const noexcept { return capture_.load(std::memory_order_acquire); }
  void set_capture(EmulatedCapture* capture) noexcept { capture_.store(capture, std::memory_order_release); }

  /// Queues `item` and returns its sequence number (1-based).
  uint64_t enqueue(WorkItem item);
  /// Queues a kernel launch, copying `call` into a recycled entry (Note [Emulated queue pool]).
  uint64_t enqueue_kernel(const KernelCall& call);
  /// Number of items queued so far.
  uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }
  bool idle() const noexcept { return timeline_->reached(submitted()); }
  /// Blocks until everything queued so far has run (errors are the caller's to raise).
  void drain() { timeline_->wait_for(submitted()); }
  /// Destroys the stream without waiting: the worker runs what is queued, then deletes
  /// the stream. Nothing may be enqueued after this call.
  void release();

 private:
  struct WorkNode {
    WorkItem item;
    WorkNode* next = nullptr;
  };

  /// Queues the node `fill` writes; returns its sequence number.
  template <typename Fill>
  uint64_t enqueue_with(Fill&& fill);
  /// A node for the host to fill: a recycled one, or a new one. Under mutex_.
  WorkNode* take_node();
  /// Runs the queue until stopped; true when the worker must delete the stream.
  bool run_worker();
  void execute(const WorkItem& item);

  const int device_;
  const int priority_;
  StickyError& error_;
  const bool launch_blocking_;
  std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();

  std::mutex mutex_;
  std::condition_variable work_cv_;
  WorkNode* head_ = nullptr;           // queued, not yet taken by the worker; guarded by mutex_
  WorkNode* tail_ = nullptr;           // guarded by mutex_
  WorkNode* done_ = nullptr;           // run by the worker, for the host to refill; guarded by mutex_
  WorkNode* free_ = nullptr;           // ready to refill; guarded by mutex_
  std::vector<std::unique_ptr<WorkNode>> nodes_;  // every node; guarded by mutex_
  bool worker_asleep_ = false;         // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  bool self_delete_ = false;           // guarded by mutex_
  std::atomic<uint64_t> submitted_{0};  // written under mutex_
  std::atomic<EmulatedCapture*> capture_{nullptr};
  std::thread worker_;
};

}  // namespace ember::detail::emulated
