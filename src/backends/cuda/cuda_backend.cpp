// The driver backend: devices, raw memory, copies, peer access, errors (see cuda_backend.h).
#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_extensions.h"
#include "backends/cuda/cuda_ops.h"
#include "ember/errors.h"
#include "runtime/driver_probe.h"
#include "runtime/registry.h"
#include "runtime/visible_devices.h"

namespace ember::detail {

namespace {

/// "12.4" from CUDA's version number 12040.
std::string cuda_version_text(int version) { return cat(version / 1000, ".", version % 1000 / 10); }

/// Why cudaGetDeviceCount found no usable device, for cuda::is_available()'s reason.
std::string why_no_device(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice: return "no NVIDIA GPU was found";
    case cudaErrorInsufficientDriver: {
      int driver = 0, runtime = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaRuntimeGetVersion(&runtime);
      if (driver == 0) return "no NVIDIA driver is installed (libcuda.so.1 was not found)";
      return cat("the NVIDIA driver is too old: it supports CUDA up to ", cuda_version_text(driver),
                 ", ember was built with CUDA ", cuda_version_text(runtime), " (update the driver)");
    }
    default:
      return cat("the CUDA runtime could not start (", cudaGetErrorName(err), ": ", cudaGetErrorString(err), ")");
  }
}

}  // namespace

std::unique_ptr<Backend> make_driver_backend(std::string& why_not) {
  // No driver, no device, or a broken installation all mean "no driver backend": the
  // caller falls back (emulated devices or is_available() == false) and keeps the reason.
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    why_not = err == cudaSuccess ? "the driver reports no visible GPU" : why_no_device(err);
    return nullptr;
  }
  return std::make_unique<driver::DriverBackend>(count);
}

std::unique_ptr<Backend> make_driver_backend() {
  std::string why_not;
  return make_driver_backend(why_not);
}

}  // namespace ember::detail

namespace ember::detail::driver {

DriverBackend::DriverBackend(int device_count)
    : device_count_(device_count), generations_(device_count, 0), live_allocations_(device_count) {
  default_streams_.reserve(device_count);
  for (int d = 0; d < device_count; ++d) default_streams_.emplace_back(d, nullptr, 0);
}

uint64_t DriverBackend::generation(int device) const {
  std::lock_guard lock(mutex_);
  return generations_[device];
}

cuda::DeviceProperties DriverBackend::properties(int device) const {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device));
  cuda::DeviceProperties out;
  out.name = prop.name;
  out.total_memory = prop.totalGlobalMem;
  out.major = prop.major;
  out.minor = prop.minor;
  out.multi_processor_count = prop.multiProcessorCount;
  unsigned char uuid[16];
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(prop.uuid.bytes[i]);
  out.uuid = format_uuid(uuid);
  return out;
}

void DriverBackend::set_device(int device) { check_cuda(cudaSetDevice(device)); }

// ---- memory -------------------------------------------------------------------------

void* DriverBackend::raw_alloc(int device, size_t bytes) {
  DeviceScope scope(device);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    // Out of memory is the caching allocator's business (free cache, retry, then a
    // typed OutOfMemoryError); clear it so no later call reports it again.
    (void)cudaGetLastError();
    return nullptr;
  }
  check_cuda(err);
  if (ptr != nullptr) {
    std::lock_guard lock(mutex_);
    live_allocations_[device].insert(ptr);
  }
  return ptr;
}

void DriverBackend::raw_free(int device, void* ptr) {
  if (ptr == nullptr) return;
  {
    // A pointer from before a cudaDeviceReset is already gone (Note [Driver reset generations]).
    std::lock_guard lock(mutex_);
    if (live_allocations_[device].erase(ptr) == 0) return;
  }
  DeviceScope scope(device);
  cudaError_t err = cudaFree(ptr);
  // After a kernel error the context is dead and every call reports it; the memory goes
  // with the context at reset, and the error is raised by the next synchronizing call,
  // so freeing (often from a destructor) does not throw it.
  if (is_kernel_error(err)) return;
  check_cuda(err);
}

std::pair<size_t, size_t> DriverBackend::mem_get_info(int device) {
  DeviceScope scope(device);
  size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total));
  return {free, total};
}

int DriverBackend::device_with_context() const noexcept {
  // Pinned memory works with every device (unified addressing): allocate it under a device
  // whose context exists, never creating one on GPU 0 for a thread that did not use it
  // (PyTorch's getDeviceIndexWithPrimaryContext, pytorch#21081).
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) (void)cudaGetLastError();
  if (primary_context_active(current)) return current;
  for (int d = 0; d < device_count_; ++d)
    if (primary_context_active(d)) return d;
  return current;
}

void* DriverBackend::pinned_alloc(size_t bytes) {
  DeviceScope scope(device_with_context());
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  check_cuda(err);
  return ptr;
}

void DriverBackend::pinned_free(void* ptr) {
  if (ptr == nullptr) return;
  cudaError_t err = cudaFreeHost(ptr);
  if (!is_kernel_error(err)) check_cuda(err);  // see raw_free
}

// ---- copies and peers ---------------------------------------------------------------

int DriverBackend::pointer_device(const void* ptr) {
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, ptr));
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

bool DriverBackend::can_access_peer(int device, int peer) {
  if (device == peer) return false;  // as cudaDeviceCanAccessPeer and torch.cuda.can_device_access_peer
  int can = 0;
  check_cuda(cudaDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

void DriverBackend::enable_peer_access(int device, int peer) {
  std::lock_guard lock(mutex_);
  if (peer_enabled_.count({device, peer}) != 0) return;
  for (auto [from, to] : {std::pair{device, peer}, std::pair{peer, device}}) {
    int can = 0;
    check_cuda(cudaDeviceCanAccessPeer(&can, from, to));
    if (can == 0) continue;  // the copy still works, staged through the host
    {
      DeviceScope scope(from);
      cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        check_cuda(err);
      }
    }
    // Expandable segments of `to`, mapped with cuMemMap, need a grant of their own.
    grant_mapped_ranges(to, from);
    peer_access_.insert({from, to});
  }
  // Pairs that cannot reach each other directly are marked too: their copies go through the host.
  peer_enabled_.insert({device, peer});
  peer_enabled_.insert({peer, device});
}

void DriverBackend::copy(void* dst, const void* src, size_t bytes, CopyKind kind, bool host_pinned,
                         BackendStream* stream) {
  if (bytes == 0) return;
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  switch (kind) {
    case CopyKind::HostToDevice: check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.handle)); break;
    case CopyKind::DeviceToHost: check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.handle)); break;
    case CopyKind::DeviceToDevice: {
      int dst_device = pointer_device(dst), src_device = pointer_device(src);
      if (dst_device == src_device) {
        check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.handle));
      } else {
        enable_peer_access(dst_device, src_device);
        check_cuda(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s.handle));
      }
      break;
    }
  }
  (void)host_pinned;  // pageable vs pinned behaviour is cudaMemcpyAsync's own
  if (launch_blocking()) check_cuda(cudaStreamSynchronize(s.handle));
}

void DriverBackend::sleep(BackendStream* stream, std::chrono::nanoseconds duration) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  int clock_khz = 0;
  check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, s.device));
  // kHz = cycles per millisecond; cycles = ns * kHz / 1e6.
  long long cycles = static_cast<long long>(static_cast<double>(duration.count()) * clock_khz / 1e6);
  launch_sleep(s.handle, cycles);
}

// ---- errors and reset ----------------------------------------------------------------

void DriverBackend::check_error(int device) {
  DeviceScope scope(device);
  check_cuda(cudaGetLastError());
}

std::shared_ptr<const fft::Plan> DriverBackend::create_fft_plan(const fft::PlanKey& key, int device) {
  return create_cufft_plan(key, device);
}

void DriverBackend::reset(int device) {
  DeviceScope scope(device);
  cudaError_t err = cudaDeviceSynchronize();
  (void)cudaGetLastError();
  if (err == cudaSuccess || !is_kernel_error(err)) return;
  // A kernel error is sticky: only cudaDeviceReset clears it, and that destroys every
  // stream, event, allocation and library handle of the device. Cached cuFFT plans go
  // first, while their context still exists.
  if (ContextLossHook release_plans = context_loss_hook()) release_plans(device);
  check_cuda(cudaDeviceReset());
  std::lock_guard lock(mutex_);
  ++generations_[device];
  live_allocations_[device].clear();
  pools_configured_.erase(device);  // the reset default pool has the driver's attributes again
  // The reset took the device's cuMemMap'ed memory with it: the expandable segments'
  // later unmaps of those ranges have nothing left to do (and must not throw).
  for (auto it = mapped_handles_.begin(); it != mapped_handles_.end();) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    stale_ranges_.insert(it->first);
    it = mapped_handles_.erase(it);
  }
  std::erase_if(peer_enabled_, [&](const auto& pair) { return pair.first == device || pair.second == device; });
  std::erase_if(peer_access_, [&](const auto& pair) { return pair.first == device || pair.second == device; });
  bump_blas_generation(device);
}

}  // namespace ember::detail::driver
