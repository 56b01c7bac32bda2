// EmulatedBackend: N virtual CUDA devices on host threads (design.md, "Three backends").
//
// Each device has a memory arena, a sticky error, a default stream, and the streams
// created on it; every stream is a worker thread running a FIFO (Note [Emulated stream
// queue]). Events are positions in a stream with the host time the worker reached them.
// Kernels run detail::cpu::run on the worker. With CUDA_LAUNCH_BLOCKING=1 (read when the
// backend is made) every enqueue waits for its work and raises its error at once.
//
// Note [Emulated strictness]
// The emulated devices refuse what CUDA refuses where a driver-backend bug of that kind
// could otherwise pass CI: capture-unsafe calls per capture and thread mode (Note
// [Capture modes]: allocation, mapping, FFT plans, frees, synchronization, event queries,
// pageable copies, pinned allocation and registration), graph isolation (Note [Emulated
// stream capture]), cudaFreeAsync in a capture (Note [Emulated graph memory]), and
// expandable segments touched from a device without an access grant (Note [Emulated peer
// access]). Where they are still more permissive than CUDA, and why:
// - Kernels read and write any host address: an out-of-bounds index or an operand on
//   another device does not fault (an unmapped page of a reservation does, as a host
//   segfault rather than a sticky error). The op layer checks devices and indices first.
// - Host code may read device memory (device_memory_is_host_addressable): Gloo's host
//   tasks need it; the driver backend says false, so code above asks before relying on it.
// - No cuBLAS handles: their creation inside a capture (which the driver backend guards
//   with a Relaxed scope) has nothing to refuse here.
// - Every pair of devices can access each other (can_access_peer); real GPUs may lack P2P,
//   and the driver then stages copies through the host.
// - No contexts: a thread need not bind one before driver API calls (the driver's device
//   scope binds it), and touching device 0 costs no memory (Note [Driver device scope]).
// - Graphs always behave as instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch, the
//   flag the driver uses; a relaunch with unfreed graph allocations is not refused.
// - Illegal peer accesses raise at the copy, not later as a sticky error.
// - Launch limits (grid sizes, cuBLAS's 32-bit dimensions) are not checked.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "backends/emulated/device_memory.h"
#include "backends/emulated/emulated_capture.h"
#include "backends/emulated/emulated_stream.h"
#include "backends/emulated/sticky_error.h"
#include "backends/emulated/stream_ordered_pool.h"
#include "runtime/backend.h"

namespace ember::detail::emulated {

class EmulatedEvent final : public BackendEvent {
 public:
  EmulatedEvent(int device, bool timing) : device_(device), timing_(timing) {}
  int device() const noexcept { return device_; }
  bool timing() const noexcept { return timing_; }
  /// The latest recording; nullptr before the first.
  std::shared_ptr<RecordMark> mark() const {
    std::lock_guard lock(mutex_);
    return mark_;
  }
  void set_mark(std::shared_ptr<RecordMark> mark) {
    std::lock_guard lock(mutex_);
    mark_ = std::move(mark);
    captured_ = {};
  }
  /// The latest recording when it was made in a capture (then mark() is nullptr).
  CaptureRecord captured() const {
    std::lock_guard lock(mutex_);
    return captured_;
  }
  void set_captured(CaptureRecord record) {
    std::lock_guard lock(mutex_);
    mark_ = nullptr;
    captured_ = std::move(record);
  }

 private:
  const int device_;
  const bool timing_;
  mutable std::mutex mutex_;
  std::shared_ptr<RecordMark> mark_;
  CaptureRecord captured_;
};

class EmulatedBackend final : public Backend {
 public:
  /// `visible[i]` is the physical emulated device that visible device i is.
  EmulatedBackend(size_t bytes_per_device, const std::vector<int>& visible);
  ~EmulatedBackend() override;

  const char* name() const noexcept override { return "emulated"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  cuda::DeviceProperties properties(int device) const override;
  void set_device(int device) override {}

  void* raw_alloc(int device, size_t bytes) override;
  void raw_free(int device, void* ptr) override;
  std::pair<size_t, size_t> mem_get_info(int device) override;
  std::string alloc_failure_reason(int device) override;
  bool device_memory_is_host_addressable() const noexcept override { return true; }
  bool supports_stream_ordered_allocation(int device) override;
  void* stream_alloc(int device, size_t bytes, BackendStream* stream) override;
  void stream_free(int device, void* ptr, BackendStream* stream) override;
  PoolUsage pool_usage(int device) override;
  void reset_pool_peaks(int device) override;
  void trim_pool(int device) override;
  bool supports_virtual_memory(int device) override;
  void* reserve_address_range(int device, size_t bytes) override;
  bool map_memory(int device, void* ptr, size_t bytes) override;
  void unmap_memory(int device, void* ptr, size_t bytes) override;
  void release_address_range(int device, void* ptr, size_t bytes) override;
  bool host_register(void* ptr, size_t bytes) override;
  void host_unregister(void* ptr) override;
  /// Host bytes registered through host_register now.
  size_t registered_host_bytes() const { return pinned_.registered_bytes(); }
  void* pinned_alloc(size_t bytes) override;
  void pinned_free(void* ptr) override;

  BackendStream* default_stream(int device) override;
  BackendStream* create_stream(int device, int priority) override;
  void destroy_stream(BackendStream* stream) noexcept override;
  bool query(BackendStream* stream) override;
  void synchronize(BackendStream* stream) override;
  void synchronize_device(int device) override;
  std::pair<int, int> priority_range() const override { return {0, -1}; }

  BackendEvent* create_event(int device, bool enable_timing) override;
  void destroy_event(BackendEvent* event) noexcept override;
  void record(BackendEvent* event, BackendStream* stream) override;
  void wait(BackendStream* stream, BackendEvent* event) override;
  bool query(BackendEvent* event) override;
  void synchronize(BackendEvent* event) override;
  float elapsed_ms(BackendEvent* start, BackendEvent* end) override;

  void launch(BackendStream* stream, const KernelCall& call) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned, BackendStream* stream) override;
  /// A FunctionWork: skipped, like a kernel, once the device has failed.
  void launch_host_task(BackendStream* stream, HostTask&& task) override;
  void sleep(BackendStream* stream, std::chrono::nanoseconds duration) override;
  bool can_access_peer(int device, int peer) override;
  void check_error(int device) override;
  void reset(int device) override;
  /// Host FFTW plans: the FFT kernel runs the cpu one on the stream worker.
  std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key, int device) override;
  /// Note [Emulated stream capture].
  void begin_capture(BackendStream* stream, CaptureMode mode) override;
  BackendGraph* end_capture(BackendStream* stream) override;
  void launch_graph(BackendGraph* graph, BackendStream* stream) override;
  void destroy_graph(BackendGraph* graph) noexcept override;
  std::pair<CaptureStatus, uint64_t> capture_status(BackendStream* stream) noexcept override;
  CaptureMode exchange_capture_mode(CaptureMode mode) noexcept override;
  bool any_capture_open() const noexcept override { return captures_.any(); }

  /// Runs `fn` on `stream` (cudaLaunchHostFunc); an exception it throws becomes the
  /// device's sticky error, exactly like a failing kernel.
  void launch_host_function(BackendStream* stream, std::function<void()> fn);
  bool launch_blocking() const noexcept { return launch_blocking_; }
  /// The physical emulated device behind visible device `device`.
  int physical_device(int device) const { return devices_.at(device)->physical; }

 private:
  struct Device {
    Device(int physical_index, size_t capacity) : physical(physical_index), memory(capacity), pool(memory) {}
    int physical;
    DeviceMemory memory;
    StreamOrderedPool pool;  // outlives the streams, whose pending frees may still reach it
    StickyError error;
    std::unique_ptr<EmulatedStream> default_stream;
    std::vector<EmulatedStream*> streams;  // every live stream, guarded by streams_mutex_
  };

  Device& device(int index) const;
  static EmulatedStream& cast(BackendStream* stream);
  static EmulatedEvent& cast(BackendEvent* event);
  /// Queues `item`; under CUDA_LAUNCH_BLOCKING waits for it and raises its error.
  void submit(EmulatedStream& stream, WorkItem item);
  /// Under CUDA_LAUNCH_BLOCKING, waits for item `seq` of `stream` and raises its error.
  void submitted(EmulatedStream& stream, uint64_t seq);
  /// Waits for every stream of `device` without raising.
  void drain_device(int device);
  /// A copy between devices: enables peer access between them (as the driver does at the
  /// first such copy) and refuses expandable-segment memory not granted to the copying
  /// device (Note [Emulated peer access]).
  void check_peer_copy(int device, const void* dst, const void* src, size_t bytes);

  const bool launch_blocking_;
  std::vector<std::unique_ptr<Device>> devices_;
  PinnedMemory pinned_;
  Captures captures_;
  mutable std::mutex streams_mutex_;
  std::mutex peer_mutex_;
  std::set<std::pair<int, int>> peer_access_;  // {from, to}: `from` reads `to`; guarded by peer_mutex_
  std::mutex graph_memory_mutex_;
  // Graph allocations the user has not freed yet (Note [Emulated graph memory]).
  std::unordered_map<void*, std::shared_ptr<void>> graph_memory_;  // guarded by graph_memory_mutex_
};

}  // namespace ember::detail::emulated
