// StickyError: a device's asynchronous (kernel) error, as CUDA keeps it.
//
// A kernel that fails on a stream worker cannot throw to the host that queued it. Like
// a device-side assert, the failure is recorded on its device and raised as CudaError by
// the next synchronizing call on that device; it stays until the device is reset, and
// later kernels and copies on the device are skipped (their results would be garbage).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace ember::detail::emulated {

class StickyError {
 public:
  /// Records a kernel failure; the first one wins. `launch_blocking` drops the hint to
  /// set CUDA_LAUNCH_BLOCKING=1, as PyTorch does when it is already set.
  void set(const std::string& what, bool launch_blocking);
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  /// Throws CudaError with the recorded message, if any.
  void raise_if_set() const;
  void clear();

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string message_;
};

}  // namespace ember::detail::emulated
