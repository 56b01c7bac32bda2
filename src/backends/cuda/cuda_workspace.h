// Temporary device memory of a driver kernel (cuFFT work areas, matmul staging, reduction
// partials).
//
// Note [Driver temporaries]
// A kernel's temporary comes from the device's caching allocator (or the allocator mode
// in force), not from cudaMalloc or cudaMallocAsync directly: it then shows in
// memory_allocated and snapshots, an out-of-memory frees the cache and retries before it
// is raised, and inside a capture it comes from the graph's private pool. It is taken on
// the launch stream, which is the calling thread's current stream (DriverBackend::launch
// runs under it), and returned when the Workspace goes out of scope, right after the work
// that uses it is enqueued: the caching allocator reuses a block only for work queued
// later on the same stream, so it stays valid until that work has run (PyTorch does the
// same with its cuBLAS and cuFFT workspaces).
#pragma once

#include <cstddef>

#include "memory/memory.h"

namespace ember::detail::driver {

class Workspace {
 public:
  Workspace(int device, size_t bytes)
      : allocator_(cuda_allocator(device)), ptr_(bytes > 0 ? allocator_.allocate(bytes) : nullptr) {}
  ~Workspace() {
    if (ptr_ != nullptr) allocator_.deallocate(ptr_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const noexcept { return ptr_; }

 private:
  Allocator& allocator_;
  void* ptr_;
};

}  // namespace ember::detail::driver
