// DriverBackend's virtual memory hooks, for expandable segments (Note [Expandable
// segments] in memory/expandable_segment.h): cuMemAddressReserve / cuMemCreate + cuMemMap
// + cuMemSetAccess / cuMemUnmap + cuMemRelease / cuMemAddressFree, as PyTorch's
// ExpandableSegment calls them. The driver API functions come from the runtime's
// cudaGetDriverEntryPointByVersion, so ember links the CUDA runtime only.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "ember/errors.h"

namespace ember::detail::driver {
namespace {

struct VirtualMemoryApi {
  PFN_cuDeviceGetAttribute_v2000 get_attribute = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;

  bool complete() const noexcept {
    return get_attribute && error_string && granularity && address_reserve && address_free && create && release &&
           map && unmap && set_access;
  }
};

template <class Fn>
void load(Fn& fn, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // The ABI of CUDA 12.0, the oldest these signatures (the _v10020/_v2000 ones) must match.
  if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return;
  }
  fn = reinterpret_cast<Fn>(address);
}

const VirtualMemoryApi& api() {
  static const VirtualMemoryApi table = [] {
    VirtualMemoryApi t;
    load(t.get_attribute, "cuDeviceGetAttribute");
    load(t.error_string, "cuGetErrorString");
    load(t.granularity, "cuMemGetAllocationGranularity");
    load(t.address_reserve, "cuMemAddressReserve");
    load(t.address_free, "cuMemAddressFree");
    load(t.create, "cuMemCreate");
    load(t.release, "cuMemRelease");
    load(t.map, "cuMemMap");
    load(t.unmap, "cuMemUnmap");
    load(t.set_access, "cuMemSetAccess");
    return t;
  }();
  return table;
}

void check_cu(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (api().error_string == nullptr || api().error_string(result, &text) != CUDA_SUCCESS || text == nullptr)
    text = "unknown error";
  fail<CudaError>("CUDA driver error: ", text, " (", call, ")");
}

CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

bool DriverBackend::supports_virtual_memory(int device) {
  const VirtualMemoryApi& cu = api();
  if (!cu.complete()) return false;
  DeviceScope scope(device, /*bind_context=*/true);  // Note [Driver device scope]
  int supported = 0;
  if (cu.get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != CUDA_SUCCESS)
    return false;
  // The allocator maps 2 MiB and 20 MiB pages: the granularity must divide them.
  size_t granularity = 0;
  CUmemAllocationProp prop = device_memory(device);
  if (cu.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return false;
  return supported != 0 && granularity > 0 && (size_t{2} << 20) % granularity == 0;
}

void* DriverBackend::reserve_address_range(int device, size_t bytes) {
  DeviceScope scope(device, /*bind_context=*/true);  // Note [Driver device scope]
  CUdeviceptr ptr = 0;
  CUresult result = api().address_reserve(&ptr, bytes, 0, 0, 0);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check_cu(result, "cuMemAddressReserve");
  return reinterpret_cast<void*>(ptr);
}

bool DriverBackend::map_memory(int device, void* ptr, size_t bytes) {
  const VirtualMemoryApi& cu = api();
  DeviceScope scope(device, /*bind_context=*/true);  // Note [Driver device scope]
  CUmemAllocationProp prop = device_memory(device);
  CUmemGenericAllocationHandle handle = 0;
  CUresult result = cu.create(&handle, bytes, &prop, 0);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return false;  // the allocator's business, as in raw_alloc
  check_cu(result, "cuMemCreate");
  const auto address = reinterpret_cast<CUdeviceptr>(ptr);
  result = cu.map(address, bytes, 0, handle, 0);
  if (result != CUDA_SUCCESS) {
    (void)cu.release(handle);
    check_cu(result, "cuMemMap");
  }
  // cudaDeviceEnablePeerAccess does not cover cuMemMap'ed memory: the owner and every
  // device with peer access to it get their own grant (enable_peer_access grants the
  // ranges mapped before it).
  std::lock_guard lock(mutex_);
  std::vector<CUmemAccessDesc> access(1);
  access[0].location = prop.location;
  access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (auto [from, to] : peer_access_) {
    if (to != device) continue;
    CUmemAccessDesc peer = access[0];
    peer.location.id = from;
    access.push_back(peer);
  }
  result = cu.set_access(address, bytes, access.data(), access.size());
  if (result != CUDA_SUCCESS) {
    (void)cu.unmap(address, bytes);
    (void)cu.release(handle);
    check_cu(result, "cuMemSetAccess");
  }
  mapped_handles_[ptr] = MappedRange{handle, device, bytes};
  return true;
}

void DriverBackend::grant_mapped_ranges(int owner, int peer) {
  // mutex_ held. Each range of `owner` becomes readable and writable from `peer`.
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = peer;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (const auto& [ptr, range] : mapped_handles_) {
    if (range.device != owner) continue;
    check_cu(api().set_access(reinterpret_cast<CUdeviceptr>(ptr), range.bytes, &access, 1), "cuMemSetAccess");
  }
}

void DriverBackend::unmap_memory(int device, void* ptr, size_t bytes) {
  DeviceScope scope(device, /*bind_context=*/true);  // Note [Driver device scope]
  // cuMemUnmap does not wait for work that still uses the memory, unlike cudaFree.
  check_cuda(cudaDeviceSynchronize());
  CUmemGenericAllocationHandle handle = 0;
  {
    std::lock_guard lock(mutex_);
    if (stale_ranges_.erase(ptr) != 0) return;  // gone with a device reset
    auto it = mapped_handles_.find(ptr);
    EMBER_CHECK(it != mapped_handles_.end(), CudaError, "CUDA error: invalid argument (unmap of ", ptr,
                ", which is not a mapped range of cuda:", device, ")");
    handle = it->second.handle;
  }
  check_cu(api().unmap(reinterpret_cast<CUdeviceptr>(ptr), bytes), "cuMemUnmap");
  {
    std::lock_guard lock(mutex_);
    mapped_handles_.erase(ptr);
  }
  check_cu(api().release(handle), "cuMemRelease");
}

void DriverBackend::release_address_range(int device, void* ptr, size_t bytes) {
  DeviceScope scope(device, /*bind_context=*/true);  // Note [Driver device scope]
  check_cu(api().address_free(reinterpret_cast<CUdeviceptr>(ptr), bytes), "cuMemAddressFree");
}

}  // namespace ember::detail::driver
