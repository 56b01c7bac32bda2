// The driver backend's factory, saying why when there is none (registry.cpp's reason for
// cuda::is_available() == false, which ember-info and the errors of cuda calls print).
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"

namespace ember::detail {

/// make_driver_backend() that, when it returns nullptr, completes "No CUDA device is
/// available: ..." in `why_not`: a build without CUDA, no NVIDIA driver, a driver older
/// than the CUDA runtime ember was built with, no GPU, or the runtime's own error.
std::unique_ptr<Backend> make_driver_backend(std::string& why_not);

}  // namespace ember::detail
