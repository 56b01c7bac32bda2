// Entry points of the memory layer used by Storage and the copy code.
#pragma once

#include "core/allocator.h"
#include "ember/cuda_graph.h"

namespace ember::detail {

/// 64-byte aligned host memory with the cpu block caches (Note [Cpu block cache]).
Allocator& cpu_allocator();

/// The caching allocator of cuda device `device` (or a pass-through one when
/// PYTORCH_NO_CUDA_MEMORY_CACHING is set). Allocations are bound to the calling
/// thread's current stream on that device.
Allocator& cuda_allocator(int device);

/// The caching pinned host allocator. record_stream(ptr, stream) after an asynchronous
/// copy makes the block wait for that stream's queued work before it is reused.
Allocator& pinned_allocator();

}  // namespace ember::detail

namespace ember::detail {

/// Returns the unused cached memory of `device` to the backend (cuda::reset_device uses
/// it); does nothing when that device's allocator was never created.
void empty_device_cache(int device);

/// CUDA graphs' private pools of the caching allocator of `device` (Note [Graph private
/// pools] in caching_allocator_graphs.cpp): route the allocations of capture `capture_id`
/// to `pool`, stop routing, drop one use of the pool.
void begin_allocate_to_pool(int device, cuda::MempoolId pool, uint64_t capture_id);
void end_allocate_to_pool(int device, cuda::MempoolId pool) noexcept;
void release_pool(int device, cuda::MempoolId pool) noexcept;

}  // namespace ember::detail
