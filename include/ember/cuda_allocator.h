// Allocator modes of cuda devices (PyTorch's torch.cuda.memory allocator API).
//
// PYTORCH_CUDA_ALLOC_CONF picks the device allocator when the first device allocator is
// made: backend:native (the caching allocator, optionally with expandable_segments:True)
// or backend:cudaMallocAsync (stream-ordered allocation from the device's pool). Before
// that, change_current_allocator() can install a user's own allocation functions instead.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "ember/stream.h"

namespace ember::cuda {

/// A user's device memory functions, as PyTorch's CUDAPluggableAllocator: every device
/// allocation calls `malloc_fn(size, device, stream)` with the current stream of the
/// device, every free calls `free_fn(ptr, size, device, stream)` with the values of its
/// allocation. Before calling free_fn, ember synchronizes the device, as cudaFree does:
/// no work queued before the free (on any stream of the device) still uses the memory, so
/// free_fn may hand it back at once, even heap memory of an emulated device. free_fn runs in
/// destructors: an exception it throws is printed to stderr as a warning and goes no
/// further. Tensor::record_stream has no effect on this memory. The stream
/// sanitizer does not follow the user's reuse: memory handed to another stream without a
/// synchronisation it sees may be reported as a race.
class PluggableAllocator {
 public:
  using MallocFn = std::function<void*(size_t size, int device, Stream stream)>;
  using FreeFn = std::function<void(void* ptr, size_t size, int device, Stream stream)>;

  /// ValueError when either function is empty.
  PluggableAllocator(MallocFn malloc_fn, FreeFn free_fn);
  /// Called by empty_cache() (optional).
  void set_reset_fn(std::function<void()> reset_fn);
  /// Called by set_per_process_memory_fraction(fraction, device) (optional).
  void set_memory_fraction_fn(std::function<void(double fraction, int device)> memory_fraction_fn);

  struct Functions {
    MallocFn malloc_fn;
    FreeFn free_fn;
    std::function<void()> reset_fn;
    std::function<void(double, int)> memory_fraction_fn;
  };
  const Functions& functions() const noexcept { return *functions_; }

 private:
  std::shared_ptr<Functions> functions_;
};

/// Makes `allocator`'s functions, as set now, the allocator of every cuda device.
/// Error "Can't swap an already initialized allocator" once a device allocator
/// exists (after the first device allocation or memory query); the current one then stays.
void change_current_allocator(const PluggableAllocator& allocator);

/// "native", "cudaMallocAsync" (PYTORCH_CUDA_ALLOC_CONF's backend) or "pluggable" (after
/// change_current_allocator), as torch.cuda.get_allocator_backend().
std::string get_allocator_backend();

namespace memory {

/// torch.cuda.memory._set_allocator_settings: `settings`, in PYTORCH_ALLOC_CONF's format
/// ("expandable_segments:True,max_split_size_mb:64"), change the allocator settings from
/// now on where PyTorch allows it (Note [Allocator settings at run time] in
/// src/memory/alloc_conf.h). ValueError for an unknown key or a bad value, Error for a
/// backend other than the process's; nothing changes then.
void set_allocator_settings(const std::string& settings);

/// The settings string last applied: set_allocator_settings' or the environment's.
std::string get_allocator_settings();

}  // namespace memory

/// torch._C._cuda_clearCublasWorkspaces: frees every (cuBLAS handle, stream) workspace
/// (CUBLAS_WORKSPACE_CONFIG's size) into its device's caching allocator, where it stays
/// reserved until empty_cache(). The next GEMM on a stream takes a new one.
void clear_cublas_workspaces();

}  // namespace ember::cuda
