#include "backends/emulated/sticky_error.h"

#include "ember/errors.h"

namespace ember::detail::emulated {

void StickyError::set(const std::string& what, bool launch_blocking) {
  std::lock_guard lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return;
  message_ = "CUDA error: device-side assert triggered\n" + what;
  if (!launch_blocking) {
    message_ +=
        "\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1";
  }
  failed_.store(true, std::memory_order_release);
}

void StickyError::raise_if_set() const {
  if (!failed()) return;
  std::lock_guard lock(mutex_);
  throw CudaError(message_);
}

void StickyError::clear() {
  std::lock_guard lock(mutex_);
  message_.clear();
  failed_.store(false, std::memory_order_release);
}

}  // namespace ember::detail::emulated
