// Pinned memory by registration (PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True),
// as PyTorch's allocWithCudaHostRegister: ordinary host memory whose pages are touched
// first, by pinned_num_register_threads threads when the allocation has at least a page
// per thread, and then page-locked with one backend host_register call.
#pragma once

#include <cstddef>

#include "runtime/backend.h"

namespace ember::detail {

/// `bytes` of registered host memory; nullptr when the host has no memory or the backend
/// cannot register (then nothing is left allocated).
void* alloc_registered_host_memory(Backend& backend, size_t bytes, size_t threads);
/// Unregisters and frees memory from alloc_registered_host_memory.
void free_registered_host_memory(Backend& backend, void* ptr);

}  // namespace ember::detail
