// CUDA error reporting for the driver backend (see cuda_check.h).
#include "backends/cuda/cuda_check.h"

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
    case cudaErrorHardwareStackError: return true;
    default: return false;
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

}  // namespace ember::detail::driver
