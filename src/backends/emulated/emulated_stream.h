// EmulatedStream: one virtual CUDA stream, a FIFO of work run by its own worker thread.
//
// Note [Emulated stream queue]
// The host hands work to the worker through a linked queue of recycled nodes, with no
// lock between them (Vyukov's unbounded single-producer single-consumer queue with a node
// cache): the host fills a node and publishes it with a release store of its
// predecessor's `next`; the worker follows `next`, and publishes the last node it has run
// in `run_`. The nodes before `run_` are the host's to refill. Each side writes its own
// cache lines: what crosses between cores per launch is the node and the link that
// publishes it, written with plain stores that drain in the background. Before, both
// sides took one mutex per item; its line, and the queue's, came back from the worker's
// core on every launch, and the lock's atomic instructions waited for those transfers.
//
// Parking: the worker polls for work briefly (Timeline::kSpin), then sleeps on a condition
// variable, having first set the PARKED bit of `producer_state_`. A producer learns of it
// from the atomic operation that takes the producers' lock (below), so a host that keeps a
// busy worker fed makes no system call, and needs no fence after writing the node: the
// atomic it already pays comes before the node's stores, which have nothing to wait for
// then. No wake-up is lost: the worker sets PARKED only while no producer holds the lock,
// with a read-modify-write that reads the last unlock (a release store made after that
// producer's link), so it either sees every link made so far, or a later producer's lock
// sees PARKED; and it holds park_mutex_ from setting the bit to waiting, which the
// producer takes before notifying.
//
// Note [Emulated stream producers]
// One host thread per stream is the common case, but any thread may enqueue: producers
// serialize on the LOCKED bit of `producer_state_`, a word the worker only touches when
// it parks. With one producer, the lock is one uncontended atomic OR on a line that stays
// in that thread's cache: what a multi-producer queue costs anyway (Vyukov's MPSC queue
// pays one atomic exchange on its tail, and recycled nodes would then need a lock-free
// free list besides). A second producer finds the bit set and waits, yielding, for the few
// stores an enqueue takes; so node recycling and sequence numbers need nothing more.
//
// Destruction lets the worker drain what is queued, then joins it; release()
// (cudaStreamDestroy) returns at once and the worker deletes the stream once its queue
// has run.
//
// Note [Emulated queue pool]
// Queue entries are WorkNodes owned by the stream and recycled, never freed while it
// lives: the host refills the nodes the worker has passed in place. A launch is packed
// into the entry's record buffer, which keeps its size (Note [Emulated launch record]), and
// the worker unpacks it into a KernelCall that keeps its vectors' capacity: once the stream
// has seen its deepest queue and its widest launches, enqueueing allocates nothing, and the
// worker neither allocates nor frees. Everything an entry owns is released on the host,
// when it takes back the nodes the worker has passed (a pageable copy's staging buffer, an
// event's mark, a kernel's payload), except a host function's closure, which the worker
// destroys right after running it so that what it captured is released before its
// completion is visible (cudaLaunchHostFunc is a test hook here, not an op path). Before,
// each launch allocated its item on the host and freed it on the worker, and the two
// threads contended for glibc's arena lock on every op. The worker publishes a node as run
// before it marks its item complete, so once the host has seen its work complete, every
// node but the last one run is free again: the pool holds the deepest queue plus one node.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backends/emulated/launch_record.h"
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
  /// Queues a kernel launch, packing `call` into a recycled entry (Note [Emulated launch record]).
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
  // A queue entry: a kernel launch's record (Note [Emulated launch record]), or other work.
  struct WorkNode {
    std::atomic<WorkNode*> next{nullptr};  // written by the host, read by the worker
    bool is_launch = false;                // `launch` holds the work, and `item` SleepWork
    LaunchRecord launch;
    WorkItem item;
  };

  /// Queues the node `fill` writes (fill(WorkNode&)); returns its sequence number.
  template <typename Fill>
  uint64_t enqueue_with(Fill&& fill);
  /// Takes the producers' lock; returns whether the worker had parked (it must be woken).
  bool lock_producers() noexcept;
  /// A node for the host to fill: one the worker has passed, or a new one. Producers only.
  WorkNode* take_node();
  /// Runs the queue until stopped; true when the worker must delete the stream.
  bool run_worker();
  /// Worker only: sleeps until `last` has a successor, or returns false once stopping with none.
  bool wait_for_work(const WorkNode* last);
  void execute(const WorkItem& item);
  /// Runs `body` unless the device has failed; records what it throws as the device's error.
  template <typename Body>
  void guarded(Body&& body);

  const int device_;
  const int priority_;
  StickyError& error_;
  const bool launch_blocking_;
  std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();
  std::atomic<EmulatedCapture*> capture_{nullptr};

  // The host's side, under the LOCKED bit. Nodes from first_ up to (not including)
  // reclaimed_ are free to refill; the worker has passed them.
  static constexpr uint32_t kLocked = 1;  // a producer is enqueueing
  static constexpr uint32_t kParked = 2;  // the worker sleeps, or is about to
  alignas(64) std::atomic<uint32_t> producer_state_{0};
  WorkNode* tail_;                                // the last node queued
  WorkNode* first_;                               // the oldest node the worker has passed, or reclaimed_
  WorkNode* reclaimed_;                           // run_ as the host last read it
  WorkNode* spare_ = nullptr;                     // a node taken whose fill threw
  std::vector<std::unique_ptr<WorkNode>> nodes_;  // every node
  std::atomic<uint64_t> submitted_{0};

  // The worker's side: the last node it has run (at first a node with no work), and the
  // call it unpacks launch records into.
  alignas(64) std::atomic<WorkNode*> run_;
  KernelCall launch_call_;

  // Parking and stopping (Note [Emulated stream queue]).
  std::mutex park_mutex_;
  std::condition_variable work_cv_;
  bool stopping_ = false;     // guarded by park_mutex_
  bool self_delete_ = false;  // guarded by park_mutex_
  std::thread worker_;
};

}  // namespace ember::detail::emulated
