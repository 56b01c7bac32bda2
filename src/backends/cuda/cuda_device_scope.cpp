// The driver backend's device scope (see cuda_check.h), apart from the error reporting: it
// reaches the driver API (cuDevicePrimaryCtxGetState), which the host-run kernel tests'
// stand-in runtime does not have.
#include <cuda.h>

#include "backends/cuda/cuda_check.h"

namespace ember::detail::driver {

// Note [Driver device scope]
// Each hook runs under its device and then gives the thread its previous device back,
// with two exceptions. A device that merely looks current (cudaGetDevice answers 0 on a
// fresh thread) may have no context bound to the thread: runtime calls bind it lazily,
// driver API calls do not, so hooks that use the driver API ask for bind_context. And the
// previous device is restored only when its primary context exists: on a fresh thread
// "restoring" device 0 would create GPU 0's context (300-500 MiB) in every process, for
// a device the thread never used (PyTorch's MaybeExchangeDevice does the same).
namespace {

using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);

PrimaryCtxGetState primary_ctx_get_state() noexcept {
  static const PrimaryCtxGetState fn = []() -> PrimaryCtxGetState {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &address, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<PrimaryCtxGetState>(address);
  }();
  return fn;
}

// Enters `device`; returns the device to restore (-1: none) or the error.
cudaError_t enter(int device, bool bind_context, int& restore) noexcept {
  restore = -1;
  int current = -1;
  if (cudaError_t err = cudaGetDevice(&current); err != cudaSuccess) return err;
  if (current == device && !bind_context) return cudaSuccess;
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) return err;
  if (current != device && primary_context_active(current)) restore = current;
  return cudaSuccess;
}

}  // namespace

bool primary_context_active(int device) noexcept {
  PrimaryCtxGetState get_state = primary_ctx_get_state();
  if (get_state == nullptr) return true;
  unsigned int flags = 0;
  int active = 1;
  // Ordinals of the runtime and the driver API agree (both apply CUDA_VISIBLE_DEVICES).
  if (get_state(static_cast<CUdevice>(device), &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

DeviceScope::DeviceScope(int device, bool bind_context) { check_cuda(enter(device, bind_context, previous_)); }

DeviceScope::DeviceScope(int device, NoThrow) noexcept {
  if (enter(device, false, previous_) != cudaSuccess) (void)cudaGetLastError();
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace ember::detail::driver
