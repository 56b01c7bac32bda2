// CachingAllocator: allocation, free, splitting/merging, deferred frees, OOM handling.
// See Note [Caching allocator policy] in caching_allocator.h.
#include "memory/caching_allocator.h"

#include <algorithm>
#include <chrono>

#include "ember/errors.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail {
namespace {

constexpr size_t kMinBlockSize = 512;                // every size is a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20;       // largest small-pool request
constexpr size_t kSmallBuffer = size_t{2} << 20;     // small-pool segment
constexpr size_t kLargeBuffer = size_t{20} << 20;    // segment for 1-10 MiB requests
constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // from here segments fit the request
constexpr size_t kRoundLarge = size_t{2} << 20;      // ... rounded up to 2 MiB
// Beyond this no device could hold the request, and rounding could overflow.
constexpr size_t kMaxRequest = size_t{1} << 62;

size_t roundup_power2_next_division(size_t size, size_t divisions) {
  if (std::has_single_bit(size)) return size;
  // Split [2^k, 2^(k+1)) into `divisions` equal steps and round up to the next step.
  size_t floor = std::bit_floor(size);
  size_t step = floor >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  size_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

}  // namespace

CachingAllocator::CachingAllocator(Backend& backend, int device, AllocatorConfig config)
    : backend_(backend), device_(device) {
  adopt_settings(config);
  if (config.per_process_memory_fraction) set_memory_fraction(*config.per_process_memory_fraction);
}

void CachingAllocator::adopt_settings(const AllocatorConfig& config) {
  config_ = config;
  power2_rounding_ = std::any_of(config.roundup_power2_divisions.begin(), config.roundup_power2_divisions.end(),
                                 [](size_t divisions) { return divisions > 1; });
  use_expandable_ = config.expandable_segments && config.caching_enabled && backend_.supports_virtual_memory(device_);
  stats_.max_split_size =
      config_.max_split_size == std::numeric_limits<size_t>::max() ? -1 : static_cast<int64_t>(config_.max_split_size);
}

void CachingAllocator::apply_settings(const AllocatorConfig& config) {
  std::lock_guard lock(mutex_);
  AllocatorConfig adopted = config;
  adopted.caching_enabled = config_.caching_enabled;
  adopt_settings(adopted);
}

CachingAllocator::~CachingAllocator() {
  try {
    std::lock_guard lock(mutex_);
    if (!pending_events_.empty()) synchronize_and_free_events();
    release_whole_segments(large_pool_);
    release_whole_segments(small_pool_);
  } catch (...) {
    // A device with a sticky error cannot free; the memory goes with the process.
  }
  // Segments still in use keep their device memory (a later free would be a bug in the
  // caller), but their bookkeeping goes with the allocator.
  std::set<Block*> firsts;  // an expandable segment's first block may be unmapped
  for (Block* head : segment_heads()) {
    while (head->prev != nullptr) head = head->prev;
    firsts.insert(head);
  }
  for (Block* block : unmapped_blocks_) {
    while (block->prev != nullptr) block = block->prev;
    firsts.insert(block);
  }
  for (Block* head : firsts) {
    for (Block* block = head; block != nullptr;) {
      Block* next = block->next;
      delete block;
      block = next;
    }
  }
  for (const auto& [stream, queue] : pending_events_)
    for (const PendingFree& entry : queue) backend_.destroy_event(entry.event);
  for (BackendEvent* event : event_pool_) backend_.destroy_event(event);
  for (Block* block : spare_blocks_) delete block;
}

CachingAllocator::Block* CachingAllocator::new_block() {
  if (spare_blocks_.empty()) return new Block;
  Block* block = spare_blocks_.back();
  spare_blocks_.pop_back();
  return block;
}

void CachingAllocator::delete_block(Block* block) noexcept {
  // Blocks come and go with every split and merge; recycling keeps malloc off the hot path.
  // Field by field, so stream_uses keeps its capacity without a vector move round trip.
  block->ptr = nullptr;
  block->size = block->requested_size = 0;
  block->stream = nullptr;
  block->stream_id = 0;
  block->pool = nullptr;
  block->prev = block->next = nullptr;
  block->allocated = false;
  block->mapped = true;
  block->expandable = nullptr;
  block->event_count = 0;
  block->context.reset();
  block->stream_uses.clear();
  block->last_use = 0;
  block->cached = {};
  try {
    spare_blocks_.push_back(block);
  } catch (...) {
    delete block;
  }
}

size_t CachingAllocator::round_size(size_t bytes) const noexcept {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  if (!power2_rounding_) return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
  size_t divisions = config_.divisions_for(bytes);
  if (divisions > 1 && bytes > kMinBlockSize * divisions) return roundup_power2_next_division(bytes, divisions);
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

size_t CachingAllocator::allocation_size(size_t size) noexcept {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

void* CachingAllocator::malloc(size_t bytes, StreamRef stream) {
  if (bytes == 0) return nullptr;  // as PyTorch: no block for an empty tensor
  std::unique_lock lock(mutex_);
  if (captures_underway_ == 0) [[likely]] {
    if (!deferred_event_blocks_.empty()) [[unlikely]]
      insert_deferred_events();
    if (!pending_events_.empty()) process_events();
  }

  AllocRequest request;
  request.stream = stream;
  if (bytes > kMaxRequest) {
    request.size = request.alloc_size = bytes;
    throw_out_of_memory(request);
  }
  request.size = round_size(bytes);
  request.pool = request.size <= kSmallSize ? &small_pool_ : &large_pool_;
  request.alloc_size = config_.caching_enabled ? allocation_size(request.size) : request.size;
  if (!pool_routes_.empty()) [[unlikely]]
    route_to_private_pool(request);

  bool found = config_.caching_enabled && get_free_block(request);
  if (!found) {
    // Nothing is given back to the device while a capture is open (as PyTorch's): a capture
    // refuses cudaFree, and a shared private pool's cached blocks may be an earlier graph's.
    const bool capturing = captures_underway_ > 0;
    if (!capturing && limit_set_ && config_.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks();
    found = alloc_block(request, false, lock) ||
            (!capturing && release_available_cached_blocks(request) && alloc_block(request, false, lock)) ||
            (release_cached_blocks(), alloc_block(request, true, lock));
  }
  // A use_on_oom MemPool's free blocks are the last resort (not for a pool's own request).
  if (!found && !use_on_oom_pools_.empty() && request.pool->owner == nullptr)
    found = get_free_use_on_oom_block(request);
  if (!found) throw_out_of_memory(request);

  Block* block = use_found_block(request);
  block->requested_size = bytes;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(*block->pool)}})
    stats_.requested_bytes[type].increase(static_cast<int64_t>(bytes));
  allocated_.insert(block);
  if (recording_) {
    block->context = capture_context();
    record_trace("alloc", reinterpret_cast<uintptr_t>(block->ptr), block->size, stream.id, block->context);
  }
  return block->ptr;
}

bool CachingAllocator::get_free_block(AllocRequest& request) {
  BlockPool& pool = *request.pool;
  const auto stream = reinterpret_cast<uintptr_t>(request.stream.native);
  auto it = pool.blocks.lower_bound(PoolEntry{stream, request.size, 0, nullptr});
  if (it == pool.blocks.end() || it->stream != stream) return false;
  const size_t max_split = config_.max_split_size;
  // Oversize blocks are kept whole: not for small requests, nor for much smaller ones.
  if (request.size < max_split && it->size >= max_split) return false;
  if (request.size >= max_split && it->size >= request.size + config_.max_non_split_rounding_size) return false;
  request.block = it->block;
  pool.blocks.erase(it);
  return true;
}

bool CachingAllocator::alloc_block(AllocRequest& request, bool is_retry, std::unique_lock<std::mutex>& lock) {
  if (is_retry) ++stats_.num_alloc_retries;
  // A capture's first allocations reach cudaMalloc (or cuMemCreate + cuMemMap), which a
  // Global-mode thread may not call while capturing: safe here, since nothing waits on the
  // capture, so the thread turns Relaxed around it, as PyTorch's allocator does
  // (Note [Capture modes] in backends/emulated/emulated_capture.h).
  CaptureModeGuard relaxed(backend_, CaptureMode::Relaxed);
  // A graph's private pool keeps fixed segments, as PyTorch's does: its lifetime is
  // counted in segments (Note [Graph private pools]).
  if (use_expandable_ && request.pool->owner == nullptr) return alloc_expandable_block(request);
  const size_t size = request.alloc_size;
  if (limit_set_ && (size > allowed_maximum_ || reserved_total_ > allowed_maximum_ - size)) return false;
  void* ptr = nullptr;
  if (config_.release_lock_on_malloc && request.pool->owner == nullptr) {
    // release_lock_on_cudamalloc, as PyTorch: other threads' cached allocations and frees
    // need not wait for a slow device allocation. Only for the shared pools: a graph's
    // private pool could be released by another thread meanwhile (this segment is not
    // counted in it yet). The bytes are reserved before the lock is let go, so that two
    // threads cannot both pass the memory-fraction check above.
    reserved_total_ += size;
    lock.unlock();
    try {
      ptr = backend_.raw_alloc(device_, size);
    } catch (...) {
      lock.lock();
      reserved_total_ -= size;
      throw;
    }
    lock.lock();
    reserved_total_ -= size;
  } else {
    ptr = raw_alloc_segment(*request.pool, size);
  }
  if (ptr == nullptr) return false;
  reserved_total_ += size;
  Block* block = new_block();
  block->ptr = static_cast<char*>(ptr);
  block->size = size;
  block->stream = request.stream.native;
  block->stream_id = request.stream.id;
  block->pool = request.pool;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(*request.pool)}}) {
    stats_.segment[type].increase(1);
    stats_.reserved_bytes[type].increase(static_cast<int64_t>(size));
  }
  if (size >= config_.max_split_size) stats_.oversize_segments.increase(1);
  ++stats_.num_device_alloc;
  if (request.pool->owner != nullptr) [[unlikely]]
    note_pool_segment(*request.pool, +1);
  if (recording_)
    record_trace("segment_alloc", reinterpret_cast<uintptr_t>(ptr), size, request.stream.id, capture_context());
  request.block = block;
  return true;
}

bool CachingAllocator::release_available_cached_blocks(const AllocRequest& request) {
  // Only with max_split_size: oversize blocks never split, so free enough of them.
  // Expandable segments give back pages instead (release_cached_blocks).
  if (config_.max_split_size == std::numeric_limits<size_t>::max() ||
      (use_expandable_ && request.pool->owner == nullptr))
    return false;
  BlockPool& pool = *request.pool;
  const auto stream = reinterpret_cast<uintptr_t>(request.stream.native);
  const size_t wanted = std::max(request.size, config_.max_split_size);
  auto it = pool.blocks.lower_bound(PoolEntry{stream, wanted, 0, nullptr});
  if (it != pool.blocks.end() && it->stream == stream) {
    release_block(it->block);
    return true;
  }
  // No single block is large enough: release the largest oversize ones of this stream.
  if (it == pool.blocks.begin()) return false;
  size_t released = 0;
  --it;
  while (released < wanted && it->size >= config_.max_split_size && it->stream == stream) {
    Block* block = it->block;
    bool at_begin = it == pool.blocks.begin();
    if (!at_begin) --it;
    released += block->size;
    release_block(block);
    if (at_begin) break;
  }
  return released >= wanted;
}

void CachingAllocator::release_cached_blocks() {
  // A capture may neither wait on events nor free (Note [Graph private pools]).
  if (captures_underway_ > 0) return;
  // Deferred frees first, so their blocks can merge and go back whole.
  synchronize_and_free_events();
  release_whole_segments(large_pool_);
  release_whole_segments(small_pool_);
  release_freeable_private_pools();
}

void CachingAllocator::release_whole_segments(BlockPool& pool) {
  std::vector<Block*> to_unmap;  // unmapping changes the pool, so after the walk
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* block = (it++)->block;
    if (block->expandable) to_unmap.push_back(block);
    else if (!block->is_split()) release_block(block);
  }
  for (Block* block : to_unmap) unmap_block(block);
}

void CachingAllocator::release_block(Block* block) {
  raw_free_segment(block);  // first: if it throws, nothing has changed
  if (sanitizer::enabled()) [[unlikely]]
    sanitizer::on_release(block->ptr, block->size, device_);
  reserved_total_ -= block->size;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(*block->pool)}}) {
    stats_.segment[type].decrease(1);
    stats_.reserved_bytes[type].decrease(static_cast<int64_t>(block->size));
  }
  if (block->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  ++stats_.num_device_free;
  if (block->pool->owner != nullptr) [[unlikely]]
    note_pool_segment(*block->pool, -1);
  if (recording_)
    record_trace("segment_free", reinterpret_cast<uintptr_t>(block->ptr), block->size, block->stream_id,
                 capture_context());
  block->pool->blocks.erase(block->cached);
  delete_block(block);
}

void CachingAllocator::garbage_collect_cached_blocks() {
  // Reclaim the least recently cached whole segments until reserved memory is back
  // under garbage_collection_threshold of the allowed maximum.
  const auto threshold =
      static_cast<size_t>(config_.garbage_collection_threshold * static_cast<double>(allowed_maximum_));
  if (reserved_total_ <= threshold) return;
  std::vector<Block*> candidates;
  for (const PoolEntry& entry : large_pool_.blocks)
    if (!entry.block->is_split() && !entry.block->expandable) candidates.push_back(entry.block);
  std::sort(candidates.begin(), candidates.end(),
            [](const Block* a, const Block* b) { return a->last_use < b->last_use; });
  const size_t target = reserved_total_ - threshold;
  size_t reclaimed = 0;
  for (Block* block : candidates) {
    if (reclaimed >= target) break;
    reclaimed += block->size;
    release_block(block);
  }
}

bool CachingAllocator::should_split(const Block* block, size_t size) const noexcept {
  if (!config_.caching_enabled) return false;
  size_t remaining = block->size - size;
  if (block->pool->is_small || block->expandable) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

CachingAllocator::Block* CachingAllocator::use_found_block(AllocRequest& request) {
  Block* block = request.block;
  BlockPool& pool = *request.pool;
  const size_t pool_type = pool_stat(pool);
  const bool already_split = block->is_split();
  if (should_split(block, request.size)) {
    // The front becomes the allocation, the rest stays cached in the same pool.
    Block* remaining = block;
    block = new_block();
    block->ptr = remaining->ptr;
    block->size = request.size;
    block->stream = remaining->stream;
    block->stream_id = remaining->stream_id;
    block->pool = &pool;
    block->expandable = remaining->expandable;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    remaining->ptr += request.size;
    remaining->size -= request.size;
    remaining->last_use = ++use_clock_;
    cache_block(remaining);
    for (size_t type : {size_t{kAggregate}, pool_type}) {
      if (block->expandable) break;  // not counted, as PyTorch (Note [Expandable segments])
      if (already_split) {
        stats_.inactive_split_bytes[type].decrease(static_cast<int64_t>(block->size));
      } else {
        stats_.inactive_split_bytes[type].increase(static_cast<int64_t>(remaining->size));
        stats_.inactive_split[type].increase(1);
      }
    }
  } else if (already_split && !block->expandable) {
    for (size_t type : {size_t{kAggregate}, pool_type}) {
      stats_.inactive_split_bytes[type].decrease(static_cast<int64_t>(block->size));
      stats_.inactive_split[type].decrease(1);
    }
  }
  block->allocated = true;
  for (size_t type : {size_t{kAggregate}, pool_type}) {
    stats_.allocation[type].increase(1);
    stats_.allocated_bytes[type].increase(static_cast<int64_t>(block->size));
    stats_.active[type].increase(1);
    stats_.active_bytes[type].increase(static_cast<int64_t>(block->size));
  }
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
  return block;
}

void CachingAllocator::free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  Block* block = allocated_.erase(ptr);
  EMBER_ASSERT(block != nullptr);  // freeing a pointer this allocator never returned
  block->allocated = false;
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(*block->pool)}}) {
    stats_.allocation[type].decrease(1);
    stats_.allocated_bytes[type].decrease(static_cast<int64_t>(block->size));
    stats_.requested_bytes[type].decrease(static_cast<int64_t>(block->requested_size));
  }
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
  if (recording_) {
    // The free's stack replaces the allocation's: a pending free shows who freed it.
    block->context = capture_context();
    record_trace("free_requested", reinterpret_cast<uintptr_t>(block->ptr), block->size, block->stream_id,
                 block->context);
  }
  if (sanitizer::enabled()) [[unlikely]] {
    std::vector<const void*> waited;
    for (const StreamRef& use : block->stream_uses) waited.push_back(use.native);
    sanitizer::on_deallocation(block->ptr, block->size, block->stream, waited);
  }
  try {
    if (!block->stream_uses.empty()) {
      if (captures_underway_ > 0) [[unlikely]] {
        deferred_event_blocks_.push_back(block);  // no event may be queried during a capture
        return;
      }
      insert_events(block);
      if (block->event_count > 0) return;
    }
    free_block(block);
  } catch (...) {
    // Only raw_free (uncached mode) can throw here, on a device with a sticky error;
    // the segment then stays reserved, which the stats still describe.
  }
}

void CachingAllocator::record_stream(void* ptr, StreamRef stream) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  Block* block = allocated_.find(ptr);
  EMBER_CHECK(block != nullptr, ValueError, "record_stream: pointer ", ptr,
              " was not allocated by the caching allocator of cuda:", device_, " or was already freed");
  // The allocation stream already orders the block's uses.
  if (stream.native == block->stream) return;
  for (const StreamRef& use : block->stream_uses)
    if (use.native == stream.native) return;
  block->stream_uses.push_back(stream);
}

void CachingAllocator::free_block(Block* block) {
  if (recording_)
    record_trace("free_completed", reinterpret_cast<uintptr_t>(block->ptr), block->size, block->stream_id,
                 std::move(block->context));
  block->context.reset();
  const size_t original_size = block->size;
  BlockPool& pool = *block->pool;
  int64_t split_blocks_change = 0;
  int64_t split_bytes_change = 0;
  for (Block* neighbour : {block->prev, block->next}) {
    size_t subsumed = try_merge_blocks(block, neighbour, pool);
    if (subsumed > 0) {
      split_blocks_change -= 1;
      split_bytes_change -= static_cast<int64_t>(subsumed);
    }
  }
  block->last_use = ++use_clock_;
  cache_block(block);
  if (block->is_split()) {
    split_blocks_change += 1;
    split_bytes_change += static_cast<int64_t>(block->size);
  }
  if (block->expandable) split_blocks_change = split_bytes_change = 0;  // see use_found_block
  for (size_t type : {size_t{kAggregate}, size_t{pool_stat(pool)}}) {
    if (split_blocks_change > 0) stats_.inactive_split[type].increase(split_blocks_change);
    if (split_blocks_change < 0) stats_.inactive_split[type].decrease(-split_blocks_change);
    if (split_bytes_change > 0) stats_.inactive_split_bytes[type].increase(split_bytes_change);
    if (split_bytes_change < 0) stats_.inactive_split_bytes[type].decrease(-split_bytes_change);
    stats_.active[type].decrease(1);
    stats_.active_bytes[type].decrease(static_cast<int64_t>(original_size));
  }
  // Without caching a segment holds exactly one block: hand it straight back.
  if (!config_.caching_enabled) release_block(block);
}

size_t CachingAllocator::try_merge_blocks(Block* dst, Block* src, BlockPool& pool) {
  if (src == nullptr || src->allocated || src->event_count > 0 || !src->stream_uses.empty() ||
      src->mapped != dst->mapped)
    return 0;
  // Out of line, so that the common merge keeps its small frame.
  if (!src->mapped) [[unlikely]]
    return merge_unmapped(dst, src);
  const size_t subsumed = absorb(dst, src);
  pool.blocks.erase(src->cached);
  delete_block(src);
  return subsumed;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_blocks();
}

void CachingAllocator::set_memory_fraction(double fraction) {
  EMBER_CHECK(fraction >= 0.0 && fraction <= 1.0, ValueError, "Invalid fraction value: ", fraction,
              ". Allowed range: 0~1");
  const size_t total = backend_.mem_get_info(device_).second;
  std::lock_guard lock(mutex_);
  allowed_maximum_ = static_cast<size_t>(fraction * static_cast<double>(total));
  limit_set_ = true;
}

DeviceStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  stats_.reset_peak();
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard lock(mutex_);
  stats_.reset_accumulated();
}

void CachingAllocator::throw_out_of_memory(const AllocRequest& request) {
  ++stats_.num_ooms;
  const auto [device_free, device_total] = backend_.mem_get_info(device_);
  if (recording_) record_trace("oom", device_free, request.alloc_size, request.stream.id, capture_context());
  const auto allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  const auto reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  std::string limit;
  if (limit_set_) limit = cat("This process has a memory allocation limit of ", format_size(allowed_maximum_), ". ");
  // The device had room, but what backs it did not (the emulated backend's host memory).
  std::string reason = backend_.alloc_failure_reason(device_);
  std::string capacity = reason.empty() ? cat("GPU ", device_, " has a total capacity of ", format_size(device_total),
                                              " of which ", format_size(device_free), " is free. ")
                                        : cat("GPU ", device_, ": ", reason, ". ");
  fail<OutOfMemoryError>("CUDA out of memory. Tried to allocate ", format_size(request.alloc_size), ". ", capacity,
                         limit, "Of the allocated memory ", format_size(allocated), " is allocated by ember, and ",
                         format_size(reserved - allocated),
                         " is reserved by ember but unallocated. If reserved but unallocated memory is large try "
                         "setting PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<size> or calling empty_cache() to "
                         "reduce fragmentation.");
}

}  // namespace ember::detail
