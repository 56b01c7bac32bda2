// CUDA error reporting for the driver backend (see cuda_check.h).
#include "backends/cuda/cuda_check.h"

#include <cuda.h>

#include "ember/errors.h"
#include "runtime/env.h"

namespace ember::detail::driver {

bool is_kernel_error(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorAssert:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
      return true;
    default:
      return false;
  }
}

const char* cuda_error_hint(cudaError_t err) noexcept {
  // Under CUDA_LAUNCH_BLOCKING the error is raised where it happened: no hint (PyTorch's
  // get_cuda_check_suffix, and the emulated backend's sticky error, do the same).
  return is_kernel_error(err) && !launch_blocking()
             ? "\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
               "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
             : "";
}

void throw_cuda_error(cudaError_t err) {
  // Clear the per-thread error so the next unrelated call does not report it again;
  // sticky (kernel) errors stay on the context, as CUDA keeps them.
  (void)cudaGetLastError();
  fail<CudaError>("CUDA error: ", cudaGetErrorString(err), cuda_error_hint(err));
}

void throw_cublas_error(cublasStatus_t status, const char* call) {
  fail<CudaError>("CUDA error: ", cublasGetStatusString(status), " when calling `", call, "`");
}

bool launch_blocking() noexcept {
  // Read once, as the CUDA runtime reads it once at context creation; parsed like the
  // emulated backend and PyTorch (a non-zero integer).
  static const bool blocking = [] {
    try {
      return env_flag("CUDA_LAUNCH_BLOCKING");
    } catch (...) {
      return false;
    }
  }();
  return blocking;
}

void check_launch(cudaStream_t stream) {
  check_cuda(cudaGetLastError());
  if (launch_blocking()) check_cuda(cudaStreamSynchronize(stream));
}

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
