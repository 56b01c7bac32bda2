// Built when ember is configured without CUDA: there is no driver backend, so without
// emulated devices cuda::is_available() is false and cuda calls throw a clear CudaError.
#include "runtime/backend.h"

namespace ember::detail {

std::unique_ptr<Backend> make_driver_backend() { return nullptr; }

}  // namespace ember::detail
