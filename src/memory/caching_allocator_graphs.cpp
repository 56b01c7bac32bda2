// CachingAllocator: the private memory pools of CUDA graphs.
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
#include <algorithm>

#include "ember/errors.h"
#include "memory/caching_allocator.h"

namespace ember::detail {

void CachingAllocator::begin_allocate_to_pool(cuda::MempoolId pool, uint64_t capture_id) {
  std::lock_guard lock(mutex_);
  for (const CaptureRoute& route : captures_underway_)
    EMBER_CHECK(!(route.pool == pool), CudaError, "beginAllocateToPool: already recording to mempool_id (",
                pool.first, ", ", pool.second, ")");
  captures_underway_.reserve(captures_underway_.size() + 1);
  auto it = graph_pools_.find(pool);
  if (it == graph_pools_.end()) {
    graph_pools_.emplace(pool, std::make_unique<PrivatePool>(pool, &set_nodes_));
  } else {
    ++it->second->use_count;
  }
  captures_underway_.push_back({pool, capture_id});
}

void CachingAllocator::end_allocate_to_pool(cuda::MempoolId pool) noexcept {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(captures_underway_.begin(), captures_underway_.end(),
                         [&](const CaptureRoute& route) { return route.pool == pool; });
  if (it != captures_underway_.end()) captures_underway_.erase(it);
}

void CachingAllocator::release_pool(cuda::MempoolId pool) noexcept {
  std::lock_guard lock(mutex_);
  auto it = graph_pools_.find(pool);
  if (it == graph_pools_.end() || it->second->use_count == 0) return;
  --it->second->use_count;
}

void CachingAllocator::route_to_private_pool(AllocRequest& request) {
  auto [status, id] = backend_.capture_status(request.stream.native);
  if (status != CaptureStatus::Active) return;
  for (const CaptureRoute& route : captures_underway_) {
    if (route.capture_id != id) continue;
    PrivatePool& pool = *graph_pools_.at(route.pool);
    request.pool = request.pool->is_small ? &pool.small : &pool.large;
    return;
  }
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
