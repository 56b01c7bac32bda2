// The cuda backend interface: what the driver and the emulated backend implement.
//
// The runtime (guards, Stream/Event handles), the caching allocators, Tensor and
// every op are written once above this interface; nothing above it may know which
// backend runs. Device indices here are already filtered and reordered by
// CUDA_VISIBLE_DEVICES. Every hook throws CudaError on a backend failure unless it
// says otherwise, and raises a device's sticky (asynchronous) error where CUDA would:
// at synchronizing calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/cuda.h"

namespace ember::detail {

struct KernelCall;
struct HostTask;
namespace fft {
struct PlanKey;
class Plan;
}  // namespace fft

/// A backend's stream object; owned by the backend, referenced by StreamState.
class BackendStream {
 public:
  virtual ~BackendStream() = default;
};

/// A backend's event object.
class BackendEvent {
 public:
  virtual ~BackendEvent() = default;
};

enum class CopyKind : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice };

/// A captured and instantiated graph (cudaGraphExec_t); made by end_capture.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
};

/// cudaStreamCaptureMode: which threads' potentially unsafe calls a capture refuses
/// (Note [Capture modes] in backends/emulated/emulated_capture.h).
enum class CaptureMode : uint8_t { Global, ThreadLocal, Relaxed };
/// cudaStreamCaptureStatus of a stream.
enum class CaptureStatus : uint8_t { None, Active, Invalidated };

class Backend {
 public:
  virtual ~Backend() = default;

  /// "driver" or "emulated".
  virtual const char* name() const noexcept = 0;
  /// Number of visible devices.
  virtual int device_count() const = 0;
  virtual cuda::DeviceProperties properties(int device) const = 0;
  /// Makes `device` current for the calling thread at the backend level (cudaSetDevice).
  virtual void set_device(int device) = 0;

  // ---- device memory ------------------------------------------------------
  /// `bytes` of device memory, or nullptr when the device has too little free. Never throws for OOM.
  virtual void* raw_alloc(int device, size_t bytes) = 0;
  /// Frees memory from raw_alloc. Implicitly synchronizes the device, as cudaFree does.
  virtual void raw_free(int device, void* ptr) = 0;
  /// {free, total} bytes.
  virtual std::pair<size_t, size_t> mem_get_info(int device) = 0;
  /// Why raw_alloc on `device` last returned nullptr when the device itself had room (the
  /// emulated backend: its host memory is exhausted); empty when there is nothing to add,
  /// the default. OutOfMemoryError messages use it; a decorator should forward it.
  virtual std::string alloc_failure_reason(int device) { return {}; }
  /// True when device memory is host memory that host code may read and write once the
  /// stream work on it has completed (the emulated backend); false, the default, when only
  /// kernels and copies can reach it. Host-side engines (Gloo) rely on it, through
  /// launch_host_task.
  virtual bool device_memory_is_host_addressable() const noexcept { return false; }
  /// True when float16 and bfloat16 arithmetic runs on the device's own units (a GPU's), so
  /// that an op is fastest kept in its reduced dtype; false, the default, where a kernel
  /// converts each element in software (emulated devices run host kernels), where an op may
  /// widen its operands to float32 once instead (Note [Half convolutions]).
  virtual bool computes_reduced_floats_natively() const noexcept { return false; }
  // ---- virtual memory (optional: expandable segments) ----------------------------
  /// True when the four hooks below work on `device`; false, the default: the caching
  /// allocator then keeps fixed-size segments even with expandable_segments:True.
  virtual bool supports_virtual_memory(int device) { return false; }
  /// Reserves `bytes` of device address space with no memory behind it; nullptr when impossible.
  virtual void* reserve_address_range(int device, size_t bytes) { return nullptr; }
  /// Backs [ptr, ptr + bytes) of a reservation with new device memory; false when the device
  /// has too little free (or, as raw_alloc, its backing is exhausted). Never throws for OOM.
  virtual bool map_memory(int device, void* ptr, size_t bytes) { return false; }
  /// Returns the memory of [ptr, ptr + bytes), which is exactly one earlier map_memory range;
  /// the addresses stay reserved. Synchronizes the device, as cudaFree does.
  virtual void unmap_memory(int device, void* ptr, size_t bytes) {}
  /// Gives back a reservation from reserve_address_range, all of whose ranges are unmapped.
  virtual void release_address_range(int device, void* ptr, size_t bytes) {}
  // ---- stream-ordered allocation (optional: backend:cudaMallocAsync) -----------------
  /// True when the hooks below work on `device`; false, the default: backend:cudaMallocAsync
  /// then raises DeviceError at the first allocation.
  virtual bool supports_stream_ordered_allocation(int device) { return false; }
  /// `bytes` from the device's default pool for work queued on `stream` from now on
  /// (cudaMallocAsync); nullptr when the device has too little free. Never throws for OOM.
  virtual void* stream_alloc(int device, size_t bytes, BackendStream* stream) { return nullptr; }
  /// Returns `ptr` to the pool once `stream`'s work queued so far has run (cudaFreeAsync):
  /// at once for later allocations on `stream`, after that point for other streams.
  virtual void stream_free(int device, void* ptr, BackendStream* stream) {}
  struct PoolUsage {
    uint64_t reserved_current = 0, reserved_high = 0;  // held by the pool
    uint64_t used_current = 0, used_high = 0;          // handed out by stream_alloc
  };
  /// The default pool's counters (cudaMemPoolAttr{Reserved,Used}Mem{Current,High}).
  virtual PoolUsage pool_usage(int device) { return {}; }
  /// Resets the high-water marks to the current values.
  virtual void reset_pool_peaks(int device) {}
  /// Synchronizes the device, then gives the pool's unused memory back (cudaMemPoolTrimTo 0).
  virtual void trim_pool(int device) {}
  /// Page-locked host memory (nullptr on failure) and its release.
  virtual void* pinned_alloc(size_t bytes) = 0;
  virtual void pinned_free(void* ptr) = 0;
  /// Page-locks [ptr, ptr + bytes) of ordinary host memory (cudaHostRegister); false, the
  /// default, when the backend cannot: the pinned allocator then uses pinned_alloc.
  virtual bool host_register(void* ptr, size_t bytes) { return false; }
  /// Undoes host_register(ptr, ...) (cudaHostUnregister).
  virtual void host_unregister(void* ptr) {}

  // ---- streams --------------------------------------------------------------
  /// The default (legacy) stream of `device`; lives as long as the backend.
  virtual BackendStream* default_stream(int device) = 0;
  /// A new stream; CudaError when the backend cannot make one. The runtime pools them
  /// (Note [Stream pool] in runtime/stream_pool.h), so it calls this at most 32 times per
  /// priority per device between resets.
  virtual BackendStream* create_stream(int device, int priority) = 0;
  /// Destroys a stream as cudaStreamDestroy does: the call does not wait, and work still
  /// queued completes. The runtime destroys only streams of a device that was reset since
  /// they were made. Never throws.
  virtual void destroy_stream(BackendStream* stream) noexcept = 0;
  /// True when all queued work has completed.
  virtual bool query(BackendStream* stream) = 0;
  virtual void synchronize(BackendStream* stream) = 0;
  /// Waits for every stream of `device`.
  virtual void synchronize_device(int device) = 0;
  /// {least, greatest} priority.
  virtual std::pair<int, int> priority_range() const = 0;

  // ---- events ---------------------------------------------------------------
  virtual BackendEvent* create_event(int device, bool enable_timing) = 0;
  virtual void destroy_event(BackendEvent* event) noexcept = 0;
  /// Captures the stream's queued work so far.
  virtual void record(BackendEvent* event, BackendStream* stream) = 0;
  /// Future work on `stream` waits for the event's captured work.
  virtual void wait(BackendStream* stream, BackendEvent* event) = 0;
  virtual bool query(BackendEvent* event) = 0;
  virtual void synchronize(BackendEvent* event) = 0;
  /// Milliseconds between two completed timing events.
  virtual float elapsed_ms(BackendEvent* start, BackendEvent* end) = 0;

  // ---- work -------------------------------------------------------------------
  /// Runs an op on `stream` of `call.device`; asynchronous.
  virtual void launch(BackendStream* stream, const KernelCall& call) = 0;
  /// Copies `bytes` contiguous bytes on `stream`. Host pointers of HostToDevice /
  /// DeviceToHost copies are pinned when `host_pinned`; otherwise the copy behaves as
  /// cudaMemcpyAsync from pageable memory does (it returns once the host side is consumed).
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned,
                    BackendStream* stream) = 0;
  /// Runs `task` on `stream` of `task.device` (Note [Host tasks] in kernels/host_task.h);
  /// asynchronous. The default, for backends whose device memory only kernels and copies
  /// reach, throws DeviceError.
  virtual void launch_host_task(BackendStream* stream, HostTask&& task);
  /// Keeps `stream` busy for `duration`.
  virtual void sleep(BackendStream* stream, std::chrono::nanoseconds duration) = 0;
  virtual bool can_access_peer(int device, int peer) = 0;
  /// Raises the device's sticky error, if any (as the next CUDA call would).
  virtual void check_error(int device) = 0;
  /// Drains the device, clears its sticky error (cudaDeviceReset, minus the allocations).
  virtual void reset(int device) = 0;

  // ---- optional subsystems ----------------------------------------------------------
  /// A prepared plan of the transform `key` on `device` (kernels/fft_plan.h), which this
  /// backend's FFT kernel executes; src/fft caches them per device (Note [FFT plan cache]).
  /// nullptr, the default, when the backend has no FFT: the plan cache then raises
  /// DeviceError. Called without any stream; a decorator should forward it.
  virtual std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key, int device) { return nullptr; }

  // ---- graph capture (optional: the defaults refuse with CudaError, status None) ----
  /// Starts capturing `stream` (cudaStreamBeginCapture): its work is recorded, not run.
  virtual void begin_capture(BackendStream* stream, CaptureMode mode);
  /// Ends the capture begun on `stream` and instantiates it (cudaStreamEndCapture and
  /// cudaGraphInstantiate). The capture ends even when this throws (invalidated, unjoined).
  virtual BackendGraph* end_capture(BackendStream* stream);
  /// Runs `graph` on `stream` as one unit of work, ordered like any other (cudaGraphLaunch).
  virtual void launch_graph(BackendGraph* graph, BackendStream* stream);
  /// Destroys a graph from end_capture; work already queued completes. Never throws.
  virtual void destroy_graph(BackendGraph* graph) noexcept;
  /// The capture status of `stream` and, while Active or Invalidated, its capture's
  /// process-unique id (cudaStreamGetCaptureInfo). Never throws.
  virtual std::pair<CaptureStatus, uint64_t> capture_status(BackendStream* stream) noexcept {
    return {CaptureStatus::None, 0};
  }
  /// Sets the calling thread's capture mode and returns its previous one
  /// (cudaThreadExchangeStreamCaptureMode; Note [Capture modes] in
  /// backends/emulated/emulated_capture.h). A thread starts in Global. The default, for
  /// backends without capture, stores nothing and returns Global. Never throws.
  virtual CaptureMode exchange_capture_mode(CaptureMode mode) noexcept { return CaptureMode::Global; }
  /// True while some capture is open on any device of this process (ended captures,
  /// failed ends included, no longer count). Default: false. Never throws.
  virtual bool any_capture_open() const noexcept { return false; }
};

/// Switches the calling thread to `mode` for the scope (PyTorch's CUDAStreamCaptureModeGuard):
/// Relaxed around calls CUDA refuses during a capture but that are safe where they are made
/// (the allocator's cudaMalloc, library handle and plan creation).
class CaptureModeGuard {
 public:
  CaptureModeGuard(Backend& backend, CaptureMode mode)
      : backend_(backend), previous_(backend.exchange_capture_mode(mode)) {}
  ~CaptureModeGuard() { backend_.exchange_capture_mode(previous_); }
  CaptureModeGuard(const CaptureModeGuard&) = delete;
  CaptureModeGuard& operator=(const CaptureModeGuard&) = delete;

 private:
  Backend& backend_;
  CaptureMode previous_;
};

/// The cuda backend, selected at first use (emulated if asked for, else driver if a GPU
/// is present). Throws CudaError when there is none; see cuda::is_available().
Backend& backend();
/// The backend if one is available, else nullptr; never throws.
Backend* backend_or_null() noexcept;
/// The selected backend itself, never the stream sanitizer's decorator that backend()
/// returns while the sanitizer is on: for the caching allocators, whose own events and
/// frees order nothing the user can see (they report their blocks to the sanitizer).
Backend& undecorated_backend();

/// Backend factories; the driver one returns nullptr when there is no usable GPU.
/// `visible` lists, in order, the physical emulated devices that are visible.
std::unique_ptr<Backend> make_emulated_backend(size_t bytes_per_device, const std::vector<int>& visible);
std::unique_ptr<Backend> make_driver_backend();  // the CUDA runtime applies CUDA_VISIBLE_DEVICES itself

}  // namespace ember::detail
