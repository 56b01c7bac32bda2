// CachingAllocator: the private memory pools of CUDA graphs and MemPools.
//
// Note [Graph private pools]
// As PyTorch's allocator: while a graph is captured, allocations on streams of that
// capture (the capturing stream and every stream forked into it) come from the graph's
// private pool instead of the device's, so that no memory a replay writes is ever handed
// to anyone else. A private pool is a pair of small/large BlockPools of its own; its
// blocks are split, merged, and reused like any others, but only by allocations routed to
// the pool: a block freed during the capture is reused by later allocations of the same
// capture (their order on replay is the capture's order), and after the capture by later
// captures that share the pool. Pools are keyed by MempoolId and counted: each capture
// into a pool adds a use (begin_allocate_to_pool), each graph reset drops one
// (release_pool). At none, empty_cache returns the pool's free segments, and the pool
// disappears with its last segment: a block still in use (a graph's output kept after
// the graph) keeps its segment, so the pool lives until its last block is freed. That
// count needs fixed segments, so a private pool never grows expandable ones, even with
// expandable_segments:True (as PyTorch's private pools). While any capture is underway the allocator neither
// queries events (a capture may refuse it) nor frees segments: blocks freed with streams
// recorded on them wait in deferred_event_blocks_ until the captures are over.
//
// A MemPool (torch.cuda.MemPool) is the same kind of pool, made by create_or_incref_pool
// with the MemPool's own use; use_mem_pool routes one thread's allocations to it (a route
// keyed by thread instead of capture, adding a use while it lasts), and a capture given its
// id routes there like a shared graph pool. The routes are tried newest first, so a guard or
// capture begun inside another one wins while it lasts (pytorch#161193). Only captures stop
// event queries and frees; a thread's route does not. Two things only MemPools have: a
// segment allocator (the user's PluggableAllocator) that replaces the backend for the pool's
// segments, and use_on_oom: an allocation outside any pool that would fail takes a free
// block of such a pool instead (never a new segment), and gives it back to that pool when
// freed. A pool leaves use_on_oom_pools_ with its last use.
#include <algorithm>
#include <optional>
#include <utility>

#include "ember/errors.h"
#include "memory/caching_allocator.h"

namespace ember::detail {

void CachingAllocator::create_or_incref_pool(cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator,
                                             bool use_on_oom) {
  std::lock_guard lock(mutex_);
  auto it = graph_pools_.find(pool);
  if (it != graph_pools_.end()) {
    EMBER_ASSERT(segment_allocator == nullptr);  // only a new MemPool brings one, with a new id
    ++it->second->use_count;
    return;
  }
  if (use_on_oom) use_on_oom_pools_.reserve(use_on_oom_pools_.size() + 1);
  auto made = std::make_unique<PrivatePool>(pool, &set_nodes_);
  made->segment_allocator = std::move(segment_allocator);
  graph_pools_.emplace(pool, std::move(made));
  if (use_on_oom) use_on_oom_pools_.push_back(pool);
}

namespace {

template <typename Routes>
void check_not_routed(const Routes& routes, cuda::MempoolId pool) {
  for (const auto& route : routes)
    EMBER_CHECK(!(route.pool == pool), CudaError, "beginAllocateToPool: already recording to mempool_id (", pool.first,
                ", ", pool.second, ")");
}

}  // namespace

void CachingAllocator::begin_allocate_to_pool(cuda::MempoolId pool, uint64_t capture_id) {
  std::lock_guard lock(mutex_);
  check_not_routed(pool_routes_, pool);
  pool_routes_.reserve(pool_routes_.size() + 1);
  auto it = graph_pools_.find(pool);
  if (it == graph_pools_.end()) {
    graph_pools_.emplace(pool, std::make_unique<PrivatePool>(pool, &set_nodes_));
  } else {
    ++it->second->use_count;
  }
  pool_routes_.push_back({pool, true, capture_id, {}});
  ++captures_underway_;
}

void CachingAllocator::begin_allocate_to_pool(cuda::MempoolId pool, std::thread::id thread) {
  std::lock_guard lock(mutex_);
  check_not_routed(pool_routes_, pool);
  auto it = graph_pools_.find(pool);
  EMBER_ASSERT(it != graph_pools_.end());  // a MemPool holds a use of its pool
  pool_routes_.push_back({pool, false, 0, thread});
  ++it->second->use_count;
}

void CachingAllocator::end_allocate_to_pool(cuda::MempoolId pool) noexcept {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(pool_routes_.begin(), pool_routes_.end(),
                         [&](const PoolRoute& route) { return route.pool == pool; });
  if (it == pool_routes_.end()) return;
  if (it->is_capture) --captures_underway_;
  pool_routes_.erase(it);
}

void CachingAllocator::release_pool(cuda::MempoolId pool) noexcept {
  std::lock_guard lock(mutex_);
  auto it = graph_pools_.find(pool);
  if (it == graph_pools_.end() || it->second->use_count == 0) return;
  if (--it->second->use_count == 0) std::erase(use_on_oom_pools_, pool);
}

int CachingAllocator::pool_use_count(cuda::MempoolId pool) const {
  std::lock_guard lock(mutex_);
  auto it = graph_pools_.find(pool);
  return it == graph_pools_.end() ? 0 : it->second->use_count;
}

void CachingAllocator::route_to_private_pool(AllocRequest& request) {
  const std::thread::id self = std::this_thread::get_id();
  std::optional<std::pair<CaptureStatus, uint64_t>> capture;  // asked once, at the first capture route
  for (auto route = pool_routes_.rbegin(); route != pool_routes_.rend(); ++route) {
    if (route->is_capture) {
      if (!capture) capture = backend_.capture_status(request.stream.native);
      if (capture->first != CaptureStatus::Active || capture->second != route->capture_id) continue;
    } else if (route->thread != self) {
      continue;
    }
    PrivatePool& pool = *graph_pools_.at(route->pool);
    request.pool = request.pool->is_small ? &pool.small : &pool.large;
    return;
  }
}

bool CachingAllocator::get_free_use_on_oom_block(AllocRequest& request) {
  for (cuda::MempoolId id : use_on_oom_pools_) {
    PrivatePool& pool = *graph_pools_.at(id);
    AllocRequest attempt = request;
    attempt.pool = request.pool->is_small ? &pool.small : &pool.large;
    if (get_free_block(attempt)) {
      request = attempt;
      return true;
    }
  }
  return false;
}

void* CachingAllocator::raw_alloc_segment(const BlockPool& pool, size_t size) {
  Allocator* source = pool.owner != nullptr ? pool.owner->segment_allocator.get() : nullptr;
  if (source == nullptr) [[likely]]
    return backend_.raw_alloc(device_, size);
  try {
    return source->allocate(size);
  } catch (const OutOfMemoryError&) {
    return nullptr;  // the caching allocator's own OOM path (release, retry, its message) follows
  }
}

void CachingAllocator::raw_free_segment(const Block* block) {
  Allocator* source = block->pool->owner != nullptr ? block->pool->owner->segment_allocator.get() : nullptr;
  if (source == nullptr) [[likely]]
    return backend_.raw_free(device_, block->ptr);
  source->deallocate(block->ptr);
}

void CachingAllocator::note_pool_segment(const BlockPool& pool, int change) noexcept {
  pool.owner->segments = static_cast<size_t>(static_cast<int64_t>(pool.owner->segments) + change);
}

void CachingAllocator::insert_deferred_events() {
  std::vector<Block*> blocks;
  blocks.swap(deferred_event_blocks_);
  for (Block* block : blocks) {
    insert_events(block);
    if (block->event_count == 0) free_block(block);
  }
}

void CachingAllocator::release_freeable_private_pools() {
  for (auto it = graph_pools_.begin(); it != graph_pools_.end();) {
    PrivatePool& pool = *it->second;
    if (pool.use_count > 0) {
      ++it;
      continue;
    }
    release_whole_segments(pool.large);
    release_whole_segments(pool.small);
    it = pool.segments == 0 ? graph_pools_.erase(it) : std::next(it);
  }
}

}  // namespace ember::detail
