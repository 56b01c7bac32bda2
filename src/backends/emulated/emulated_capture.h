// Stream capture on emulated devices: CUDA graphs without a GPU.
//
// Note [Emulated stream capture]
// begin_capture marks a stream as capturing; from then on the backend hands every item
// queued to it (kernels, copies between device and pinned memory, host tasks, sleeps)
// to its capture instead of its worker. A stream that waits on an event recorded in the
// capture joins it (a fork) and is captured too; the capture's items keep the order the
// host issued them in, which respects every dependency the capture can express (a wait
// names an earlier record). end_capture requires each joined stream's work to be joined
// back into the origin stream (origin waits on an event recorded after that work), as
// cudaStreamEndCapture does, and makes an EmulatedGraph of the items. launch_graph queues
// the graph as one GraphWork: the replay stream's worker runs the items in order, so a
// replay is ordered on its stream like any other work and costs the host one enqueue.
// The items copy their kernel calls whole (operands, payloads): they reference device
// memory that the caller keeps valid (the graph's private memory pool, static inputs).
//
// Note [Emulated graph memory]
// cudaMallocAsync on a capturing stream adds an allocation node: the memory belongs to the
// graph, at an address fixed for every replay, and is not the default pool's (CUDA keeps
// graph memory apart). Here it is taken from the device at once and held by the capture,
// then by its graph (and each queued replay), and by its user until cudaFreeAsync; it
// goes back to the device when neither holds it. A free of it inside the capture (a free
// node) ends the user's hold only. Graphs behave as instantiated with
// cudaGraphInstantiateFlagAutoFreeOnLaunch (the driver's flag): a replay while the previous
// replay's allocations are still held reuses them. cudaFreeAsync on a capturing stream of
// memory not allocated in a graph is refused, and invalidates the capture.
//
// Note [Capture modes]
// While a capture is open, CUDA refuses "potentially unsafe" calls (here: device memory
// allocation and frees, virtual-memory mapping, cuFFT plan creation, device
// synchronization, event query and synchronization, copies to or from pageable memory,
// pinned allocation, host registration). Whether a call is refused depends on two modes:
// the capture's (cudaStreamBeginCapture) and the calling thread's, which starts as Global
// and is changed by cudaThreadExchangeStreamCaptureMode (Backend::exchange_capture_mode).
// A thread in Relaxed mode is refused nothing; in ThreadLocal, only while a capture it
// began itself, not in Relaxed mode, is open; in Global, also while another thread's
// Global capture is open. Relaxed captures refuse no thread. A refused call throws
// CudaError "operation not permitted when stream is capturing" and invalidates the
// captures that refused it. Calls that would wait on the capture itself (synchronizing
// or querying a capturing stream or an event recorded in a capture) are refused in
// every mode, and invalidate that capture. An invalidated capture still records nothing
// new; its end_capture throws and ends it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backends/emulated/work_item.h"
#include "runtime/backend.h"

namespace ember::detail::emulated {

class EmulatedStream;
class EmulatedEvent;

/// One open capture sequence. Guarded by the owning Captures' mutex.
struct EmulatedCapture {
  struct Member {
    EmulatedStream* stream;
    uint64_t count = 0;   // items this stream has added
    uint64_t joined = 0;  // of them, how many the origin stream has waited for
  };
  uint64_t id = 0;
  CaptureMode mode = CaptureMode::Global;
  std::thread::id thread;
  int device = 0;
  bool open = true;  // false once ended: a stale event record no longer joins anything
  bool invalidated = false;
  std::vector<Member> members;  // the origin stream first
  std::vector<WorkItem> items;
  std::vector<std::shared_ptr<void>> memory;  // its stream_alloc's (Note [Emulated graph memory])

  Member* member(const EmulatedStream* stream) noexcept;
};

/// Where an event was last recorded inside a capture.
struct CaptureRecord {
  std::shared_ptr<EmulatedCapture> capture;
  const EmulatedStream* stream = nullptr;
  uint64_t position = 0;  // the stream's captured item count at the record
};

class EmulatedGraph final : public BackendGraph {
 public:
  EmulatedGraph(int device, std::shared_ptr<const std::vector<WorkItem>> items)
      : device_(device), items_(std::move(items)) {}
  int device() const noexcept { return device_; }
  const std::shared_ptr<const std::vector<WorkItem>>& items() const noexcept { return items_; }

 private:
  int device_;
  std::shared_ptr<const std::vector<WorkItem>> items_;
};

/// The backend's open captures (Note [Emulated stream capture]).
class Captures {
 public:
  /// True while some capture is open anywhere: the cheap test before the others.
  bool any() const noexcept { return open_.load(std::memory_order_acquire) > 0; }

  void begin(EmulatedStream& stream, CaptureMode mode);
  EmulatedGraph* end(EmulatedStream& stream);
  /// Hands `item` to the capture of `stream`; false when the stream is not capturing.
  bool append(EmulatedStream& stream, WorkItem&& item);
  bool append_kernel(EmulatedStream& stream, const KernelCall& call);
  /// Makes the capture of `stream` own `memory` (a graph allocation) for the graph's life;
  /// false when the stream is not capturing.
  bool add_memory(EmulatedStream& stream, std::shared_ptr<void> memory);
  /// Refuses `what` on the capturing `stream` (always throws CudaError).
  [[noreturn]] void refuse(EmulatedStream& stream, const char* what);
  /// Records `event` on the capturing `stream`; false when the stream is not capturing.
  bool record(EmulatedEvent& event, EmulatedStream& stream);
  /// The capture side of `stream` waiting on `event`; false when it has none (an
  /// ordinary wait follows).
  bool wait(EmulatedStream& stream, EmulatedEvent& event);
  /// Sets the calling thread's capture mode, returning the previous one (Note [Capture modes]).
  static CaptureMode exchange_thread_mode(CaptureMode mode) noexcept;
  /// Refuses a potentially unsafe call of the calling thread on `device` (Note [Capture
  /// modes]); `involves_device` adds every capture open on `device`.
  void check_unsafe_call(int device, const char* what, bool involves_device = false);
  /// Refuses a query or synchronization of an event recorded in an open capture.
  void check_event(EmulatedEvent& event, const char* what);
  std::pair<CaptureStatus, uint64_t> status(const EmulatedStream& stream) noexcept;

 private:
  void detach_members(EmulatedCapture& capture) noexcept;
  [[noreturn]] void invalidate_and_throw(const std::vector<EmulatedCapture*>& refusing, const char* what);

  std::mutex mutex_;
  std::vector<std::shared_ptr<EmulatedCapture>> open_captures_;  // guarded by mutex_
  std::atomic<int> open_{0};
  uint64_t next_id_ = 1;  // guarded by mutex_
};

}  // namespace ember::detail::emulated
