// Entry points of the memory layer used by Storage and the copy code.
#pragma once

#include <memory>
#include <string>

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

/// Private pools (CUDA graphs' and MemPools') of the caching allocator of `device` (Note
/// [Graph private pools] in caching_allocator_graphs.cpp): route the allocations of capture
/// `capture_id` (or of the calling thread) to `pool`, stop routing, drop one use of the pool.
void begin_allocate_to_pool(int device, cuda::MempoolId pool, uint64_t capture_id);
void begin_allocate_current_thread_to_pool(int device, cuda::MempoolId pool);
void end_allocate_to_pool(int device, cuda::MempoolId pool) noexcept;
void release_pool(int device, cuda::MempoolId pool) noexcept;

/// A MemPool's pool on `device` (mem_pool.cpp): made with one use, its segments from
/// `segment_allocator` when given; the uses of a pool (0 when none); the segments of
/// `pool` on every device, as a JSON array in memory_snapshot_json's schema.
void create_or_incref_pool(int device, cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator,
                           bool use_on_oom);
int pool_use_count(int device, cuda::MempoolId pool);
std::string pool_snapshot_json(cuda::MempoolId pool);

/// A new id for a MemPool or graph_pool_handle(), {0, n} (PyTorch's MemPool uid).
cuda::MempoolId new_user_mempool_id() noexcept;

}  // namespace ember::detail
