// Stand-in for the driver's Workspace (src/backends/cuda/cuda_workspace.h) when its kernel
// files run on the host execution layer: there is no device and no caching allocator here,
// and a launch has run by the time it returns, so a temporary is host memory freed at the
// end of its scope. Found before the real header because tests/cuda_host/include comes
// first on the include path of the rewritten kernel files.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace ember::detail::driver {

class Workspace {
 public:
  Workspace(int /*device*/, size_t bytes) : ptr_(bytes > 0 ? std::malloc(bytes) : nullptr) {
    if (bytes > 0 && ptr_ == nullptr) throw std::bad_alloc();
  }
  ~Workspace() { std::free(ptr_); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const noexcept { return ptr_; }

 private:
  void* ptr_;
};

}  // namespace ember::detail::driver
