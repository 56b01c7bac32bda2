// EmulatedBackend: N virtual CUDA devices on host threads (design.md, "Three backends").
//
// Each device has a memory arena, a sticky error, a default stream, and the streams
// created on it; every stream is a worker thread running a FIFO (Note [Emulated stream
// queue]). Events are positions in a stream with the host time the worker reached them.
// Kernels run detail::cpu::run on the worker. With CUDA_LAUNCH_BLOCKING=1 (read when the
// backend is made) every enqueue waits for its work and raises its error at once.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
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
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned,
            BackendStream* stream) override;
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

  const bool launch_blocking_;
  std::vector<std::unique_ptr<Device>> devices_;
  PinnedMemory pinned_;
  Captures captures_;
  mutable std::mutex streams_mutex_;
};

}  // namespace ember::detail::emulated
