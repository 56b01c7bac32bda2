#include "backends/emulated/emulated_stream.h"

#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"

namespace ember::detail::emulated {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};

// A GPU sleep keeps the stream busy, not a host core: a timed wait is enough, with a
// short spin at the end for sub-scheduler-tick precision.
void busy_for(std::chrono::nanoseconds duration) {
  auto deadline = std::chrono::steady_clock::now() + duration;
  constexpr auto kSpin = std::chrono::microseconds(50);
  if (duration > kSpin) std::this_thread::sleep_until(deadline - kSpin);
  while (std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

}  // namespace

EmulatedStream::EmulatedStream(int device, int priority, StickyError& error, bool launch_blocking)
    : device_(device), priority_(priority), error_(error), launch_blocking_(launch_blocking) {
  // The queue starts with one node that stands for work already run.
  nodes_.push_back(std::make_unique<WorkNode>());
  tail_ = first_ = reclaimed_ = nodes_.back().get();
  run_.store(tail_, std::memory_order_relaxed);
  try {
    worker_ = std::thread([this] {
      if (run_worker()) delete this;  // released by release(): the last thing the worker does
    });
  } catch (const std::system_error& e) {
    // Out of threads (or of memory for a stack): a failed cudaStreamCreate, not a crash.
    fail<CudaError>("CUDA error: resource allocation failed: cannot start the worker thread of a new stream on cuda:",
                    device, " (", e.what(), ")");
  }
}

EmulatedStream::~EmulatedStream() {
  if (!worker_.joinable()) return;  // release()d: running on the worker, which has stopped
  {
    std::lock_guard lock(park_mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

void EmulatedStream::release() {
  // Notified under the lock: once it is released the worker may delete the stream.
  std::lock_guard lock(park_mutex_);
  worker_.detach();
  stopping_ = true;
  self_delete_ = true;
  work_cv_.notify_one();
}

bool EmulatedStream::lock_producers() noexcept {
  uint32_t state = producer_state_.fetch_or(kLocked, std::memory_order_acquire);
  while (state & kLocked) [[unlikely]] {
      // Another host thread is enqueueing on this stream (Note [Emulated stream producers]):
      // it holds the lock for a few stores, or one allocation when the queue is deeper than ever.
      std::this_thread::yield();
      state = producer_state_.fetch_or(kLocked, std::memory_order_acquire);
    }
  return (state & kParked) != 0;
}

EmulatedStream::WorkNode* EmulatedStream::take_node() {
  if (spare_ != nullptr) return std::exchange(spare_, nullptr);
  if (first_ == reclaimed_) {
    // Take back the nodes the worker has passed since last time (acquire: its reads of
    // them, and a host function's closure it destroyed, come before), releasing here what
    // their entries own beyond a launch record's buffer (Note [Emulated queue pool]).
    WorkNode* run = run_.load(std::memory_order_acquire);
    for (WorkNode* node = reclaimed_; node != run; node = node->next.load(std::memory_order_relaxed)) {
      if (node->is_launch) {
        node->launch.release();
      } else if (!std::holds_alternative<SleepWork>(node->item)) {
        node->item = SleepWork{};
      }
    }
    reclaimed_ = run;
  }
  if (first_ != reclaimed_) return std::exchange(first_, first_->next.load(std::memory_order_relaxed));
  // The queue is deeper than ever before: a new node, kept for the stream's lifetime.
  nodes_.push_back(std::make_unique<WorkNode>());
  return nodes_.back().get();
}

template <typename Fill>
uint64_t EmulatedStream::enqueue_with(Fill&& fill) {
  const bool wake = lock_producers();
  WorkNode* node = nullptr;
  try {
    node = take_node();
    fill(*node);
  } catch (...) {
    if (node != nullptr) {
      node->is_launch = false;
      node->item = SleepWork{};
      spare_ = node;
    }
    producer_state_.store(wake ? kParked : 0, std::memory_order_release);
    throw;
  }
  node->next.store(nullptr, std::memory_order_relaxed);  // not linked yet: the worker cannot reach it
  tail_->next.store(node, std::memory_order_release);    // publishes the item
  tail_ = node;
  const uint64_t seq = submitted_.load(std::memory_order_relaxed) + 1;
  submitted_.store(seq, std::memory_order_release);
  // Note [Emulated launch prefetch]: the node the next launch will fill was last read by the
  // worker, on its core. Written as it is, its lines are still being taken from there when this
  // thread's next locked instruction (a reference count, a mutex) waits for its stores to
  // drain. Asked for now, they arrive while the thread goes on with the op.
  if (first_ != reclaimed_) {
    prefetch_for_write(first_);  // its link and header
    first_->launch.prefetch_for_write();
  }
  // Unlocks, and clears PARKED: this producer wakes the worker.
  producer_state_.store(0, std::memory_order_release);
  if (wake) [[unlikely]] {
    // The worker holds the mutex from setting PARKED until it waits.
    { std::lock_guard lock(park_mutex_); }
    work_cv_.notify_one();
  }
  return seq;
}

uint64_t EmulatedStream::enqueue(WorkItem item) {
  return enqueue_with([&](WorkNode& node) {
    node.is_launch = false;
    node.item = std::move(item);
  });
}

uint64_t EmulatedStream::enqueue_kernel(const KernelCall& call) {
  return enqueue_with([&](WorkNode& node) {
    node.launch.pack(call);
    node.is_launch = true;  // `item` was left SleepWork when the entry was recycled
  });
}

template <typename Body>
void EmulatedStream::guarded(Body&& body) {
  if (error_.failed()) return;  // the device is in an error state: the work is skipped
  try {
    body();
  } catch (const std::exception& e) {
    error_.set(e.what(), launch_blocking_);
  } catch (...) {
    error_.set("unknown error", launch_blocking_);
  }
}

bool EmulatedStream::wait_for_work(const WorkNode* last) {
  auto has_work = [&] { return last->next.load(std::memory_order_acquire) != nullptr; };
  for (;;) {
    // Poll briefly before sleeping, so a host that enqueues again soon (the common case)
    // neither pays for a wake-up nor waits for one.
    if (Timeline::spin_until(has_work)) return true;
    std::unique_lock lock(park_mutex_);
    // PARKED only while no producer holds the lock (Note [Emulated stream queue]); one
    // that does is about to link its node.
    uint32_t state = producer_state_.load(std::memory_order_relaxed);
    do {
      if (state & kLocked) break;
    } while (!producer_state_.compare_exchange_weak(state, state | kParked, std::memory_order_acq_rel,
                                                    std::memory_order_relaxed));
    if (state & kLocked) continue;
    work_cv_.wait(lock, [&] { return has_work() || stopping_; });
    return has_work();  // else stopping, and everything queued has run
  }
}

bool EmulatedStream::run_worker() {
  uint64_t done = 0;
  WorkNode* last = run_.load(std::memory_order_relaxed);
  for (;;) {
    WorkNode* node = last->next.load(std::memory_order_acquire);
    if (node == nullptr) {
      if (wait_for_work(last)) continue;
      std::lock_guard lock(park_mutex_);
      return self_delete_;
    }
    if (node->is_launch) {
      // Unpacking allocates only for a launch wider than any before; if that fails, the
      // launch fails as a kernel would.
      guarded([&] {
        node->launch.unpack(launch_call_);
        cpu::run(launch_call_);
      });
      node->launch.give_back(launch_call_);
    } else {
      execute(node->item);
      // A host function's closure goes before its completion is visible (what it captured
      // may be waited for); everything else stays for the host to reuse.
      if (auto* function = std::get_if<FunctionWork>(&node->item)) function->fn = nullptr;
    }
    // `last` goes back to the host before `node` completes (Note [Emulated queue pool]).
    run_.store(node, std::memory_order_release);
    last = node;
    timeline_->advance(++done);
  }
}

void EmulatedStream::execute(const WorkItem& item) {
  std::visit(Overloaded{
                 [&](const KernelWork& w) { guarded([&] { cpu::run(w.call); }); },
                 [&](const CopyWork& w) {
                   guarded([&] { std::memcpy(w.dst, w.staging ? w.staging.get() : w.src, w.bytes); });
                 },
                 [&](const FunctionWork& w) { guarded([&] { w.fn(); }); },
                 [&](const RecordWork& w) { w.mark->time = std::chrono::steady_clock::now(); },
                 [&](const WaitWork& w) { w.mark->timeline->wait_for(w.mark->seq); },
                 [&](const SleepWork& w) {
                   if (w.duration.count() > 0) busy_for(w.duration);
                 },
                 [&](const GraphWork& w) {
                   for (const WorkItem& captured : *w.items) execute(captured);
                 },
             },
             item);
}

}  // namespace ember::detail::emulated
