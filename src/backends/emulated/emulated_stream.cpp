#include "backends/emulated/emulated_stream.h"

#include <cstring>
#include <exception>
#include <system_error>

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

uint64_t EmulatedStream::enqueue(WorkItem item) {
  uint64_t seq;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(item));
    seq = submitted_.load(std::memory_order_relaxed) + 1;
    submitted_.store(seq, std::memory_order_release);
    wake = worker_asleep_;
  }
  if (wake) work_cv_.notify_one();
  return seq;
}

bool EmulatedStream::run_worker() {
  std::deque<WorkItem> batch;
  uint64_t done = 0;
  for (;;) {
    // Poll briefly for more work before sleeping, so a host that enqueues again soon
    // (the common case) neither pays for a wake-up nor waits for one.
    Timeline::spin_until([&] { return submitted_.load(std::memory_order_acquire) != done; });
    {
      std::unique_lock lock(mutex_);
      while (queue_.empty() && !stopping_) {
        worker_asleep_ = true;
        work_cv_.wait(lock);
        worker_asleep_ = false;
      }
      if (queue_.empty()) return self_delete_;  // stopping, and everything queued has run
      batch.swap(queue_);
    }
    for (WorkItem& item : batch) {
      execute(item);
      // Release the item's resources (staging buffers, kernel arguments) before the
      // host can observe completion.
      item = SleepWork{};
      timeline_->advance(++done);
    }
    batch.clear();
  }
}

void EmulatedStream::execute(WorkItem& item) {
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
                 [&](KernelWork& w) { guarded([&] { cpu::run(w.call); }); },
                 [&](CopyWork& w) {
                   guarded([&] { std::memcpy(w.dst, w.staging ? w.staging.get() : w.src, w.bytes); });
                 },
                 [&](FunctionWork& w) { guarded([&] { w.fn(); }); },
                 [&](RecordWork& w) { w.mark->time = std::chrono::steady_clock::now(); },
                 [&](WaitWork& w) { w.mark->timeline->wait_for(w.mark->seq); },
                 [&](SleepWork& w) {
                   if (w.duration.count() > 0) busy_for(w.duration);
                 },
             },
             item);
}

}  // namespace ember::detail::emulated
