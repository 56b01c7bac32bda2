// DriverBackend: the Backend interface (runtime/backend.h) over the CUDA runtime.
//
// Device indices are the CUDA runtime's, so CUDA_VISIBLE_DEVICES is applied by CUDA
// itself. Each hook makes its device current for the duration of the call
// (DeviceScope) and restores the caller's, because the runtime layer tracks the
// current device per thread on its own. The default stream of a device is CUDA's
// legacy default stream (handle 0, as PyTorch's), the others are non-blocking streams
// with priorities.
//
// Note [Driver reset generations]
// reset(device) may have to call cudaDeviceReset to clear a sticky kernel error, which
// destroys every stream, event and allocation of the device. Streams and events remember
// the generation they were made in, and raw_free forgets pointers of a past generation,
// so destroying a stale handle later never touches a recycled one.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/backend.h"

namespace ember::detail::driver {

struct DriverStream final : BackendStream {
  DriverStream(int device, cudaStream_t handle, uint64_t generation)
      : device(device), handle(handle), generation(generation) {}
  int device;
  cudaStream_t handle;  // nullptr: the legacy default stream
  uint64_t generation;
};

struct DriverEvent final : BackendEvent {
  DriverEvent(int device, cudaEvent_t handle, uint64_t generation)
      : device(device), handle(handle), generation(generation) {}
  int device;
  cudaEvent_t handle;
  uint64_t generation;
};

inline DriverStream& as_driver(BackendStream* stream) { return *static_cast<DriverStream*>(stream); }
inline DriverEvent& as_driver(BackendEvent* event) { return *static_cast<DriverEvent*>(event); }

class DriverBackend final : public Backend {
 public:
  explicit DriverBackend(int device_count);
  ~DriverBackend() override = default;

  const char* name() const noexcept override { return "driver"; }
  bool computes_reduced_floats_natively() const noexcept override { return true; }
  int device_count() const override { return device_count_; }
  cuda::DeviceProperties properties(int device) const override;
  void set_device(int device) override;

  void* raw_alloc(int device, size_t bytes) override;
  void raw_free(int device, void* ptr) override;
  std::pair<size_t, size_t> mem_get_info(int device) override;
  void* pinned_alloc(size_t bytes) override;
  void pinned_free(void* ptr) override;
  bool host_register(void* ptr, size_t bytes) override;
  void host_unregister(void* ptr) override;
  // Stream-ordered allocation from the default memory pool (cuda_allocator_modes.cpp).
  bool supports_stream_ordered_allocation(int device) override;
  void* stream_alloc(int device, size_t bytes, BackendStream* stream) override;
  void stream_free(int device, void* ptr, BackendStream* stream) override;
  PoolUsage pool_usage(int device) override;
  void reset_pool_peaks(int device) override;
  void trim_pool(int device) override;
  // Virtual memory over cuMem* driver calls (cuda_virtual_memory.cpp).
  bool supports_virtual_memory(int device) override;
  void* reserve_address_range(int device, size_t bytes) override;
  bool map_memory(int device, void* ptr, size_t bytes) override;
  void unmap_memory(int device, void* ptr, size_t bytes) override;
  void release_address_range(int device, void* ptr, size_t bytes) override;

  BackendStream* default_stream(int device) override;
  BackendStream* create_stream(int device, int priority) override;
  void destroy_stream(BackendStream* stream) noexcept override;
  bool query(BackendStream* stream) override;
  void synchronize(BackendStream* stream) override;
  void synchronize_device(int device) override;
  std::pair<int, int> priority_range() const override;

  BackendEvent* create_event(int device, bool enable_timing) override;
  void destroy_event(BackendEvent* event) noexcept override;
  void record(BackendEvent* event, BackendStream* stream) override;
  void wait(BackendStream* stream, BackendEvent* event) override;
  bool query(BackendEvent* event) override;
  void synchronize(BackendEvent* event) override;
  float elapsed_ms(BackendEvent* start, BackendEvent* end) override;

  void launch(BackendStream* stream, const KernelCall& call) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned, BackendStream* stream) override;
  void sleep(BackendStream* stream, std::chrono::nanoseconds duration) override;
  bool can_access_peer(int device, int peer) override;
  void check_error(int device) override;
  void reset(int device) override;
  std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key, int device) override;
  // cuda_graphs.cpp: cudaStreamBeginCapture, cudaStreamEndCapture + cudaGraphInstantiate, ...
  void begin_capture(BackendStream* stream, CaptureMode mode) override;
  BackendGraph* end_capture(BackendStream* stream) override;
  void launch_graph(BackendGraph* graph, BackendStream* stream) override;
  void destroy_graph(BackendGraph* graph) noexcept override;
  std::pair<CaptureStatus, uint64_t> capture_status(BackendStream* stream) noexcept override;
  CaptureMode exchange_capture_mode(CaptureMode mode) noexcept override;
  bool any_capture_open() const noexcept override { return open_captures_.load(std::memory_order_acquire) > 0; }

 private:
  uint64_t generation(int device) const;
  /// Enables peer access both ways between two devices, once, with the grants of
  /// grant_mapped_ranges.
  void enable_peer_access(int device, int peer);
  /// Grants `peer` access to every mapped range of `owner` (cuMemSetAccess); mutex_ held.
  void grant_mapped_ranges(int owner, int peer);
  /// The calling thread's device if its primary context exists, else one whose does (else
  /// the current one): where pinned memory is allocated and registered.
  int device_with_context() const noexcept;
  /// The device owning a device pointer (UVA); -1 for host memory.
  static int pointer_device(const void* ptr);

  int device_count_;
  std::atomic<int> open_captures_{0};  // begun and not yet ended, by any thread
  std::vector<DriverStream> default_streams_;
  mutable std::mutex mutex_;  // guards the members below
  std::vector<uint64_t> generations_;
  std::vector<std::unordered_set<void*>> live_allocations_;  // per device, for reset
  std::set<std::pair<int, int>> peer_enabled_;               // pairs set up by enable_peer_access (both ways)
  std::set<std::pair<int, int>> peer_access_;                // of them, {from, to} where `from` reads `to` directly
  struct MappedRange {
    unsigned long long handle;  // from cuMemCreate
    int device;
    size_t bytes;
  };
  std::unordered_map<void*, MappedRange> mapped_handles_;  // by the start of each map_memory range
  std::unordered_set<void*> stale_ranges_;                 // mapped ranges a device reset destroyed, not yet unmapped
  std::set<int> pools_configured_;                         // devices whose default pool is set up
};

/// The CUDA stream behind a backend stream.
inline cudaStream_t native_stream(BackendStream* stream) { return as_driver(stream).handle; }

}  // namespace ember::detail::driver
