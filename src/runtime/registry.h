// The runtime registry: the one selected cuda backend and the per-device runtime objects.
//
// Note [Backend selection]
// The backend is chosen once per process, at the first cuda call, under a mutex:
//   1. emulated, when ember::cuda::emulate(n, bytes) was called before, or when
//      EMBER_EMULATED_DEVICES=n is set (memory per device from EMBER_EMULATED_MEMORY,
//      default 8 GiB); CUDA_VISIBLE_DEVICES filters and reorders the n devices;
//   2. else the driver backend (make_driver_backend(): null without a GPU or CUDA build);
//   3. else none: is_available() is false and every call needing a device throws.
// A configuration error (a bad EMBER_EMULATED_* value) is thrown and nothing is selected,
// so the next call reports it again. The registry is never destroyed: stream workers may
// outlive static destruction; at exit every device is drained instead.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/env.h"
#include "runtime/stream_state.h"

namespace ember::detail {

struct Runtime {
  std::unique_ptr<Backend> backend;  // null: no cuda device
  int device_count = 0;
  std::string unavailable_reason;  // why backend is null or has no device
  std::vector<std::shared_ptr<StreamState>> default_streams;
};

/// The registry, selecting the backend on first use.
Runtime& runtime();

/// Hook the memory layer registers so that reset_device() can empty the device's cache
/// (the caching allocator lives above the runtime, so the runtime cannot call it directly).
using DeviceResetHook = void (*)(int device);
void set_device_reset_hook(DeviceResetHook hook) noexcept;
DeviceResetHook device_reset_hook() noexcept;

/// Hook the FFT plan caches register so that a backend about to destroy a device's context
/// (the driver's cudaDeviceReset after a sticky kernel error) releases the device's cached
/// plans first, while their context still exists (the caches live above the backends).
using ContextLossHook = void (*)(int device);
void set_context_loss_hook(ContextLossHook hook) noexcept;
ContextLossHook context_loss_hook() noexcept;

/// Note [Sanitizer hooks]
/// The stream sanitizer (src/sanitizer/) decorates the backend interface from above the
/// registry, so the registry names none of it; the sanitizer installs two hooks instead:
///   - the selection hook, run when the backend is selected (it applies
///     EMBER_CUDA_SANITIZER, which may throw), installed while the library loads
///     (sanitizer.cpp, init_priority 101: before any static initializer may select a backend);
///   - the decorator, set while the sanitizer is enabled (cuda::sanitizer::enable, cleared by
///     disable): backend() and backend_or_null() return decorator(backend). Off, it costs one
///     load and a predictable branch per backend() call.
using BackendSelectionHook = void (*)();
void set_backend_selection_hook(BackendSelectionHook hook) noexcept;
using BackendDecorator = Backend& (*)(Backend& upstream);
void set_backend_decorator(BackendDecorator decorator) noexcept;

/// Bumped by reset_device(); streams and events remember the value they were made under.
std::atomic<uint64_t>& generation_counter(int device);

/// Graph captures open on `device`, kept by CUDAGraph from the backend's begin_capture to
/// the end of that capture: reset_device() refuses while any is open (a reset under an open
/// capture left the backend capturing for good, refusing every later synchronization).
std::atomic<int>& open_capture_counter(int device);

}  // namespace ember::detail
