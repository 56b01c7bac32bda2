// ember::cuda: devices, the current device and stream, guards, synchronization (torch.cuda).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "ember/cuda_graph.h"
#include "ember/device.h"
#include "ember/stream.h"

namespace ember::cuda {

/// True when a cuda backend (a GPU, or emulated devices) is usable. Never throws: an
/// invalid EMBER_EMULATED_DEVICES / EMBER_EMULATED_MEMORY makes it false with a warning on
/// stderr, and the first call that needs a device raises the error.
bool is_available();
int device_count();
/// "driver" or "emulated"; selecting the backend if that has not happened yet.
std::string backend_name();
/// True when a GPU is usable through the driver backend. Does not select a backend,
/// so emulate() may still be called after it.
bool driver_is_available();
/// Turns on `count` emulated devices of `bytes_per_device` each; only before first cuda use.
void emulate(int count, size_t bytes_per_device = size_t{8} << 30);

// Device indices: wherever a device is optional, -1 means the current device; an index
// below -1 or past the last device is an IndexError.

int current_device();
/// Makes `device` current for the calling thread; -1 does nothing (torch.cuda.set_device(-1)).
void set_device(int device);
void set_device(Device device);
/// Waits for all work on every stream of `device` (-1: the current device).
void synchronize(int device = -1);
void synchronize(Device device);

struct DeviceProperties {
  std::string name;
  size_t total_memory = 0;
  int major = 0, minor = 0;
  int multi_processor_count = 0;
  /// The device's UUID, 36 characters ("8-4-4-4-12" hex digits), as PyTorch prints
  /// props.uuid; CUDA_VISIBLE_DEVICES may name the device as "GPU-" and a prefix of it.
  /// Emulated devices have a fixed one per emulated device.
  std::string uuid;
};
DeviceProperties get_device_properties(int device = -1);
std::string get_device_name(int device = -1);

/// Drains the device, clears a sticky error, frees the allocator's cache, and invalidates
/// the device's non-default streams and events created before (cudaDeviceReset).
void reset_device(int device = -1);

/// with torch.cuda.device(d): sets the current device, restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  int original_device() const noexcept { return original_; }

 private:
  int original_;
};

/// with torch.cuda.stream(s): makes s current on its device and that device current;
/// restores both on exit.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int original_device_;
  Stream original_stream_;
};

/// The calling thread's current stream on `device` (-1: the current device).
Stream current_stream(int device = -1);
Stream default_stream(int device = -1);
/// Makes `stream` the calling thread's current stream on its device.
void set_stream(const Stream& stream);

/// Keeps the current stream busy for `duration` (torch.cuda._sleep).
void sleep(std::chrono::nanoseconds duration);
bool can_device_access_peer(int device, int peer_device);

// ---- memory (caching allocator) ---------------------------------------------
size_t memory_allocated(int device = -1);
size_t max_memory_allocated(int device = -1);
size_t memory_reserved(int device = -1);
size_t max_memory_reserved(int device = -1);
/// The spec's older names (PyTorch keeps them, deprecated): memory_reserved() and
/// max_memory_reserved(). The first call of each writes "FutureWarning:
/// `torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`" (PyTorch's
/// text; max_ likewise) to stderr once per process.
size_t memory_cached(int device = -1);
size_t max_memory_cached(int device = -1);
void reset_peak_memory_stats(int device = -1);
void reset_accumulated_memory_stats(int device = -1);
void empty_cache();
std::map<std::string, int64_t> memory_stats(int device = -1);
std::string memory_summary(int device = -1);
/// The allocator state of every device in PyTorch's snapshot schema.
std::string memory_snapshot_json();
void record_memory_history(bool enabled, size_t max_entries = 100000);
/// {free, total} bytes of the device.
std::pair<size_t, size_t> mem_get_info(int device = -1);
void set_per_process_memory_fraction(double fraction, int device = -1);
/// Statistics of the pinned host allocator.
std::map<std::string, int64_t> host_memory_stats();

}  // namespace ember::cuda
