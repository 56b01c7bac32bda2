// DriverBackend's allocator-mode hooks: stream-ordered allocation (backend:cudaMallocAsync),
// cudaMallocAsync / cudaFreeAsync on the device's default memory pool, configured as
// PyTorch's CUDAMallocAsyncAllocator does (a release threshold of UINT64_MAX, so freed
// memory stays in the pool until trim_pool, and every reuse policy on), and host memory
// registration (pinned_use_cuda_host_register).
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace ember::detail::driver {
namespace {

cudaMemPool_t default_pool(int device) {
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device));
  return pool;
}

uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  uint64_t value = 0;
  check_cuda(cudaMemPoolGetAttribute(pool, attribute, &value));
  return value;
}

}  // namespace

bool DriverBackend::supports_stream_ordered_allocation(int device) {
  int supported = 0;
  check_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
  return supported != 0;
}

void* DriverBackend::stream_alloc(int device, size_t bytes, BackendStream* stream) {
  DeviceScope scope(device);  // the legacy default stream allocates on the current device
  {
    std::lock_guard lock(mutex_);
    if (pools_configured_.insert(device).second) {
      cudaMemPool_t pool = default_pool(device);
      uint64_t threshold = UINT64_MAX;
      check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
      int enable = 1;
      check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &enable));
      check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &enable));
      check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &enable));
    }
  }
  void* ptr = nullptr;
  cudaError_t err = cudaMallocAsync(&ptr, bytes, native_stream(stream));
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // the allocator raises OutOfMemoryError itself
    return nullptr;
  }
  check_cuda(err);
  return ptr;
}

void DriverBackend::stream_free(int device, void* ptr, BackendStream* stream) {
  DeviceScope scope(device);
  check_cuda(cudaFreeAsync(ptr, native_stream(stream)));
}

Backend::PoolUsage DriverBackend::pool_usage(int device) {
  DeviceScope scope(device);
  cudaMemPool_t pool = default_pool(device);
  PoolUsage usage;
  usage.reserved_current = pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent);
  usage.reserved_high = pool_attribute(pool, cudaMemPoolAttrReservedMemHigh);
  usage.used_current = pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent);
  usage.used_high = pool_attribute(pool, cudaMemPoolAttrUsedMemHigh);
  return usage;
}

void DriverBackend::reset_pool_peaks(int device) {
  DeviceScope scope(device);
  cudaMemPool_t pool = default_pool(device);
  // Zero is the one valid value: the driver resets each mark to its current value.
  uint64_t zero = 0;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
}

void DriverBackend::trim_pool(int device) {
  DeviceScope scope(device);
  check_cuda(cudaDeviceSynchronize());
  check_cuda(cudaMemPoolTrimTo(default_pool(device), 0));
}

// cudaHostRegister for pinned_use_cuda_host_register: the memory can be used by any device.
// Failing for lack of resources (or support) is "cannot": false, and the pinned allocator
// falls back to pinned_alloc, as the hook's contract says; a range registered twice is a
// caller's bug and throws, as on the emulated devices.
bool DriverBackend::host_register(void* ptr, size_t bytes) {
  DeviceScope scope(device_with_context());  // as pinned_alloc
  cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorHostMemoryAlreadyRegistered || is_kernel_error(err)) throw_cuda_error(err);
  (void)cudaGetLastError();
  return false;
}

void DriverBackend::host_unregister(void* ptr) {
  cudaError_t err = cudaHostUnregister(ptr);
  if (!is_kernel_error(err)) check_cuda(err);  // as pinned_free
}

}  // namespace ember::detail::driver
