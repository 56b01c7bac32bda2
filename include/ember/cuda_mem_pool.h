// ember::cuda memory pools of the caching allocator (torch.cuda.MemPool, torch.cuda.use_mem_pool).
//
// A pool is a private set of segments of one device's caching allocator, keyed by a
// MempoolId: the pool of a MemPool, of a graph_pool_handle() or of a CUDA graph's capture are
// one kind of thing, so a MemPool's id may be passed to CUDAGraph::capture_begin or
// graph(..., pool.id()). Note [Graph private pools] (src/memory/caching_allocator_graphs.cpp)
// has the mechanism.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <string>

#include "ember/device.h"

namespace ember::cuda {

class PluggableAllocator;

/// The id of a caching-allocator memory pool (PyTorch's MempoolId_t): {graph uid, 0} for a
/// graph's own private pool, {0, n} for a MemPool or one made by graph_pool_handle(); {0, 0} is none.
struct MempoolId {
  uint64_t first = 0;
  uint64_t second = 0;
  bool empty() const noexcept { return first == 0 && second == 0; }
  friend bool operator==(const MempoolId&, const MempoolId&) = default;
  friend auto operator<=>(const MempoolId&, const MempoolId&) = default;
};

/// A memory pool of the current device's caching allocator (torch.cuda.MemPool). Allocations
/// reach it through use_mem_pool (or a CUDA graph capture given its id). Its memory stays
/// reserved while the pool or a tensor from it lives; once the pool is destroyed and its last
/// block freed, empty_cache() returns its segments. With `allocator`, the pool's segments come
/// from the allocator's functions instead of the device; with `use_on_oom`, allocations that
/// would otherwise raise OutOfMemoryError take a free block of this pool first. Move-only; a
/// moved-from pool has no id and a use count of 0. When the device's allocator is not the
/// native one, Error "cudaMallocAsync does not yet support createOrIncrefPool. ..." (or
/// "CUDAPluggableAllocator ..."), as PyTorch's other allocators refuse.
class MemPool {
 public:
  explicit MemPool(std::shared_ptr<PluggableAllocator> allocator = {}, bool use_on_oom = false);
  /// Drops the pool's own use (PyTorch's releasePool); tensors and graphs keep it alive.
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;
  MemPool(MemPool&& other) noexcept;
  MemPool& operator=(MemPool&& other) noexcept;

  MempoolId id() const noexcept { return id_; }
  /// The device the pool was made on.
  int device() const noexcept { return device_; }
  /// The pool's reference count: 1 for the MemPool itself, plus one per active use_mem_pool
  /// guard and per capture or live graph using it (PyTorch's MemPool.use_count()).
  int64_t use_count() const;
  /// The pool's segments as a JSON array, each in memory_snapshot_json()'s segment schema.
  std::string snapshot() const;
  /// The allocator given at construction (empty: the device's own memory).
  const std::shared_ptr<PluggableAllocator>& allocator() const noexcept { return allocator_; }

 private:
  void release() noexcept;

  MempoolId id_;
  int device_ = -1;
  std::shared_ptr<PluggableAllocator> allocator_;
};

/// with torch.cuda.use_mem_pool(pool, device): allocations of the calling thread on `device`
/// (default: the current device) come from `pool` until the guard ends; other threads'
/// allocations are not affected. A guard inside another guard of the same thread routes to
/// its own pool until it ends (pytorch#161193); a second guard of the same pool while one is
/// active raises CudaError "beginAllocateToPool: already recording to mempool_id". The guard
/// holds a use of the pool, so destroying the MemPool meanwhile is safe. ValueError for a
/// non-cuda device or a pool made on another device or moved from.
class use_mem_pool {
 public:
  explicit use_mem_pool(const MemPool& pool, int device = -1);
  use_mem_pool(const MemPool& pool, Device device);
  ~use_mem_pool();
  use_mem_pool(const use_mem_pool&) = delete;
  use_mem_pool& operator=(const use_mem_pool&) = delete;

 private:
  MempoolId id_;
  int device_;
};

}  // namespace ember::cuda
