// Built when ember is configured without CUDA: there is no driver backend, so without
// emulated devices cuda::is_available() is false and cuda calls throw a clear CudaError.
#include "runtime/driver_probe.h"

namespace ember::detail {

std::unique_ptr<Backend> make_driver_backend(std::string& why_not) {
  why_not = "ember was built without the CUDA driver backend";
  return nullptr;
}

std::unique_ptr<Backend> make_driver_backend() { return nullptr; }

}  // namespace ember::detail
