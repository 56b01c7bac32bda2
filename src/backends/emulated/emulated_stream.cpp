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
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

void EmulatedStream::release() {
  // Notified under the lock: once it is released the worker may delete the stream.
  std::lock_guard lock(mutex_);
  worker_.detach();
  stopping_ = true;
  self_delete_ = true;
  work_cv_.notify_one();
}

EmulatedStream::WorkNode* EmulatedStream::take_node() {
  if (free_ == nullptr && done_ != nullptr) {
    // Recycle what the worker has run: release, here on the host, what its entries own
    // beyond a kernel's argument vectors (Note [Emulated queue pool]).
    for (WorkNode* node = done_; node != nullptr; node = node->next) {
      if (auto* kernel = std::get_if<KernelWork>(&node->item)) {
        kernel->call.payload.reset();
      } else if (!std::holds_alternative<SleepWork>(node->item)) {
        node->item = SleepWork{};
      }
    }
    free_ = std::exchange(done_, nullptr);
  }
  if (free_ != nullptr) return std::exchange(free_, free_->next);
  // The queue is deeper than ever before: a new node, kept for the stream's lifetime.
  auto node = std::make_unique<WorkNode>();
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

template <typename Fill>
uint64_t EmulatedStream::enqueue_with(Fill&& fill) {
  uint64_t seq;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    WorkNode* node = take_node();
    try {
      fill(node->item);
    } catch (...) {
      node->item = SleepWork{};
      node->next = free_;
      free_ = node;
      throw;
    }
    node->next = nullptr;
    (tail_ != nullptr ? tail_->next : head_) = node;
    tail_ = node;
    seq = submitted_.load(std::memory_order_relaxed) + 1;
    submitted_.store(seq, std::memory_order_release);
    wake = worker_asleep_;
  }
  if (wake) work_cv_.notify_one();
  return seq;
}

uint64_t EmulatedStream::enqueue(WorkItem item) {
  return enqueue_with([&](WorkItem& slot) { slot = std::move(item); });
}

uint64_t EmulatedStream::enqueue_kernel(const KernelCall& call) {
  return enqueue_with([&](WorkItem& slot) {
    // Copy-assignment reuses the capacity of the previous launch's vectors.
    if (auto* kernel = std::get_if<KernelWork>(&slot)) {
      kernel->call = call;
    } else {
      slot.emplace<KernelWork>(KernelWork{call});
    }
  });
}

bool EmulatedStream::run_worker() {
  uint64_t done = 0;
  for (;;) {
    // Poll briefly for more work before sleeping, so a host that enqueues again soon
    // (the common case) neither pays for a wake-up nor waits for one.
    Timeline::spin_until([&] { return submitted_.load(std::memory_order_acquire) != done; });
    WorkNode* batch;
    {
      std::unique_lock lock(mutex_);
      while (head_ == nullptr && !stopping_) {
        worker_asleep_ = true;
        work_cv_.wait(lock);
        worker_asleep_ = false;
      }
      if (head_ == nullptr) return self_delete_;  // stopping, and everything queued has run
      batch = std::exchange(head_, nullptr);
      tail_ = nullptr;
    }
    // The host no longer writes these nodes' links: new work starts a new list.
    for (WorkNode* node = batch;; node = node->next) {
      execute(node->item);
      // A host function's closure goes before its completion is visible (what it
      // captured may be waited for); everything else stays for the host to reuse.
      if (auto* function = std::get_if<FunctionWork>(&node->item)) function->fn = nullptr;
      if (node->next != nullptr) {
        timeline_->advance(++done);
        continue;
      }
      // The batch goes back to the host before its last item completes, so a host that
      // has seen it complete finds every node it has used free again.
      {
        std::lock_guard lock(mutex_);
        node->next = done_;
        done_ = batch;
      }
      timeline_->advance(++done);
      break;
    }
  }
}

void EmulatedStream::execute(const WorkItem& item) {
  auto guarded = [&](auto&& body) {
    if (error_.failed()) return;  // the device is in an error state: the work is skipped
    try {
      body();
    } catch (const std::exception& e) {
      error_.set(e.what(), launch_blocking_);
    } catch (...) {
      error_.set("unknown error", launch_blocking_);
    }
  };
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
