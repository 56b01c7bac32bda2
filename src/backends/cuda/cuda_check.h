// check_cuda: the one wrapper every CUDA runtime call of the driver backend goes through.
//
// A failing call becomes ember::CudaError "CUDA error: <cudaGetErrorString>", the
// wording PyTorch users search for. Errors raised by a kernel (device-side assert,
// illegal address, ...) surface at whatever API call happens to observe them, so
// their message also carries PyTorch's two hint lines about asynchronous reporting
// (not under CUDA_LAUNCH_BLOCKING=1, where the failing call itself reports them).
#pragma once

#include <cuda_runtime_api.h>

namespace ember::detail::driver {

/// True for the errors a running kernel raises (reported asynchronously).
bool is_kernel_error(cudaError_t err) noexcept;
/// The hint lines that follow "CUDA error: ..." for `err` (empty for most errors).
const char* cuda_error_hint(cudaError_t err) noexcept;
[[noreturn]] void throw_cuda_error(cudaError_t err);

/// Throws CudaError when `err` is not cudaSuccess (clearing the non-sticky error state).
inline void check_cuda(cudaError_t err) {
  if (err != cudaSuccess) [[unlikely]]
    throw_cuda_error(err);
}

/// CUDA_LAUNCH_BLOCKING=1 (read once): every launch waits and raises its own errors.
bool launch_blocking() noexcept;

/// After a kernel launch: raises launch-configuration errors at once, and under
/// CUDA_LAUNCH_BLOCKING also the kernel's own error, at the call that caused it.
void check_launch(cudaStream_t stream);

/// Turns the calling thread's capture mode Relaxed for the scope
/// (cudaThreadExchangeStreamCaptureMode), around calls that allocate and that CUDA would
/// otherwise refuse while a capture is open (Note [Capture modes] in
/// backends/emulated/emulated_capture.h).
class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope() noexcept { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }
  ~RelaxedCaptureScope() { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

/// True when `device`'s primary context exists (cuDevicePrimaryCtxGetState): making the
/// device current then creates nothing. True when the driver cannot tell.
bool primary_context_active(int device) noexcept;

/// Makes `device` current for the scope (Note [Driver device scope]).
class DeviceScope {
 public:
  struct NoThrow {};
  /// `bind_context`: call cudaSetDevice even when `device` looks current, so that the
  /// thread has the primary context bound before driver API (cuMem*) calls.
  explicit DeviceScope(int device, bool bind_context = false);
  /// For destructors: failures are ignored.
  DeviceScope(int device, NoThrow) noexcept;
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;  // the device to restore; -1: none
};

}  // namespace ember::detail::driver
