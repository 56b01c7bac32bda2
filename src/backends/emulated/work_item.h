// The work an emulated stream runs, one item at a time, in the order it was queued.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "backends/emulated/timeline.h"
#include "kernels/kernel_call.h"

namespace ember::detail::emulated {

/// One recording of an event: a position in a stream, and the host time the worker
/// reached it. `time` is written by the worker before the position completes, so it may
/// be read by anyone who has seen `timeline->reached(seq)`.
struct RecordMark {
  std::shared_ptr<Timeline> timeline;
  uint64_t seq = 0;
  int device = -1;
  std::chrono::steady_clock::time_point time{};
  bool done() const noexcept { return timeline->reached(seq); }
};

struct KernelWork {
  KernelCall call;
};
/// memcpy(dst, src or staging, bytes); `staging` holds a snapshot of a pageable source.
struct CopyWork {
  void* dst;
  const void* src;
  size_t bytes;
  std::unique_ptr<std::byte[]> staging;
};
struct RecordWork {
  std::shared_ptr<RecordMark> mark;
};
struct WaitWork {
  std::shared_ptr<RecordMark> mark;
};
struct SleepWork {
  std::chrono::nanoseconds duration;
};
/// A host function run on the stream (cudaLaunchHostFunc); its exceptions are kernel errors.
struct FunctionWork {
  std::function<void()> fn;
};

struct GraphWork;

using WorkItem = std::variant<KernelWork, CopyWork, RecordWork, WaitWork, SleepWork, FunctionWork, GraphWork>;

/// A captured graph's replay: its items run in order as one item (Note [Emulated stream capture]).
struct GraphWork {
  std::shared_ptr<const std::vector<WorkItem>> items;
};

}  // namespace ember::detail::emulated
