// CachingAllocator: expandable segments, the pool growth of expandable_segments:True.
// See Note [Expandable segments] in expandable_segment.h.
#include <algorithm>

#include "ember/errors.h"
#include "memory/caching_allocator.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail {
namespace {

constexpr size_t kSmallPage = size_t{2} << 20;   // kSmallBuffer: the small pool's page
constexpr size_t kLargePage = size_t{20} << 20;  // kLargeBuffer: the large pool's page

}  // namespace

// Free or unmapped blocks from `block` on (free first, then unmapped pages) that together
// hold `size` bytes: the growth PyTorch's find_expandable_block looks for.
CachingAllocator::Block* CachingAllocator::find_expandable_block(const AllocRequest& request) {
  auto is_free = [](const Block* b) {
    return b != nullptr && !b->allocated && b->event_count == 0 && b->stream_uses.empty();
  };
  auto has_room = [&](const Block* b) {
    size_t bytes = 0;
    while (bytes < request.size && is_free(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= request.size;
  };
  auto free_before = [&](const Block* unmapped) { return unmapped->prev != nullptr && is_free(unmapped->prev); };
  // The smallest unmapped range that fits, then the lowest address, as PyTorch's ordered set.
  Block* best = nullptr;
  for (Block* unmapped : unmapped_blocks_) {
    if (unmapped->stream != request.stream.native || unmapped->pool != request.pool) continue;
    // A free mapped block just before the unmapped range grows into it.
    if (!has_room(free_before(unmapped) ? unmapped->prev : unmapped)) continue;
    if (best == nullptr || unmapped->size < best->size || (unmapped->size == best->size && unmapped->ptr < best->ptr))
      best = unmapped;
  }
  if (best != nullptr) return free_before(best) ? best->prev : best;

  const size_t page = request.pool->is_small ? kSmallPage : kLargePage;
  const size_t total = backend_.mem_get_info(device_).second;
  const size_t pages = std::max<size_t>(1, (total + total / 8 + page - 1) / page);
  std::unique_ptr<ExpandableSegment> segment = ExpandableSegment::reserve(backend_, device_, page, pages);
  if (segment == nullptr) return nullptr;
  Block* block = new_block();
  block->ptr = segment->ptr();
  block->size = segment->size();
  block->stream = request.stream.native;
  block->stream_id = request.stream.id;
  block->pool = request.pool;
  block->mapped = false;
  block->expandable = segment.get();
  expandable_segments_.push_back(std::move(segment));
  unmapped_blocks_.insert(block);
  return block;
}

bool CachingAllocator::alloc_expandable_block(AllocRequest& request) {
  Block* candidate = find_expandable_block(request);
  if (candidate == nullptr) return false;
  // The candidate is free -> unmapped -> ... or unmapped: map from its start until it holds
  // the request, each map merging with the free block before it.
  if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, request.size), request.stream))
    return false;
  while (candidate->size < request.size) {
    Block* next = candidate->next;
    if (!map_block(next, std::min(request.size - candidate->size, next->size), request.stream)) return false;
    candidate = next;  // map_block merged the previous candidate into it
  }
  request.pool->blocks.erase(candidate->cached);
  request.block = candidate;
  return true;
}

bool CachingAllocator::map_block(Block* to_map, size_t size, const StreamRef& stream) {
  ExpandableSegment& segment = *to_map->expandable;
  const size_t bytes = segment.round_to_pages(size);
  if (limit_set_ && (bytes > allowed_maximum_ || reserved_total_ > allowed_maximum_ - bytes)) return false;
  if (segment.map(to_map->ptr, size) == 0) return false;
  unmapped_blocks_.erase(to_map);
  to_map->mapped = true;
  if (bytes < to_map->size) {
    // to_map -> rest (still unmapped) -> to_map's old next
    Block* rest = new_block();
    rest->ptr = to_map->ptr + bytes;
    rest->size = to_map->size - bytes;
    rest->stream = to_map->stream;
    rest->stream_id = to_map->stream_id;
    rest->pool = to_map->pool;
    rest->mapped = false;
    rest->expandable = to_map->expandable;
    rest->prev = to_map;
    rest->next = to_map->next;
    if (rest->next) rest->next->prev = rest;
    to_map->next = rest;
    to_map->size = bytes;
    unmapped_blocks_.insert(rest);
  }
  BlockPool& pool = *to_map->pool;
  try_merge_blocks(to_map, to_map->prev, pool);
  try_merge_blocks(to_map, to_map->next, pool);
  to_map->last_use = ++use_clock_;
  cache_block(to_map);
  reserved_total_ += bytes;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(pool)}})
    stats_.reserved_bytes[type].increase(static_cast<int64_t>(bytes));
  ++stats_.num_device_alloc;
  if (recording_)
    record_trace("segment_map", reinterpret_cast<uintptr_t>(to_map->ptr), bytes, stream.id, capture_context());
  return true;
}

void CachingAllocator::unmap_block(Block* block) {
  BlockPool& pool = *block->pool;
  const auto [ptr, bytes] = block->expandable->unmap(block->ptr, block->size);
  if (bytes == 0) return;
  if (sanitizer::enabled()) [[unlikely]]
    sanitizer::on_release(ptr, bytes, device_);
  pool.blocks.erase(block->cached);
  // The parts before and after the unmapped pages stay mapped, as free blocks of their own.
  auto split_off = [&](char* start, size_t size, Block* prev, Block* next) {
    Block* part = new_block();
    part->ptr = start;
    part->size = size;
    part->stream = block->stream;
    part->stream_id = block->stream_id;
    part->pool = &pool;
    part->expandable = block->expandable;
    part->prev = prev;
    part->next = next;
    if (prev) prev->next = part;
    if (next) next->prev = part;
    part->last_use = block->last_use;
    cache_block(part);
  };
  const auto before = static_cast<size_t>(ptr - block->ptr);
  const size_t after = block->size - before - bytes;
  if (before > 0) split_off(block->ptr, before, block->prev, block);
  if (after > 0) split_off(ptr + bytes, after, block, block->next);
  block->ptr = ptr;
  block->size = bytes;
  block->mapped = false;
  try_merge_blocks(block, block->prev, pool);
  try_merge_blocks(block, block->next, pool);
  unmapped_blocks_.insert(block);
  reserved_total_ -= bytes;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(pool)}})
    stats_.reserved_bytes[type].decrease(static_cast<int64_t>(bytes));
  ++stats_.num_device_free;
  if (recording_)
    record_trace("segment_unmap", reinterpret_cast<uintptr_t>(ptr), bytes, block->stream_id, capture_context());
  if (block->prev == nullptr && block->next == nullptr) release_expandable_segment(block);
}

size_t CachingAllocator::merge_unmapped(Block* dst, Block* src) noexcept {
  const size_t subsumed = absorb(dst, src);
  unmapped_blocks_.erase(src);
  delete_block(src);
  return subsumed;
}

void CachingAllocator::release_expandable_segment(Block* block) {
  EMBER_ASSERT(!block->mapped && block->size == block->expandable->size());
  unmapped_blocks_.erase(block);
  for (auto it = expandable_segments_.begin(); it != expandable_segments_.end(); ++it) {
    if (it->get() != block->expandable) continue;
    expandable_segments_.erase(it);  // gives the address range back
    break;
  }
  delete_block(block);
}

}  // namespace ember::detail
