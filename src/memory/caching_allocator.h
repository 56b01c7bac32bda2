// CachingAllocator: the device memory cache of one device, over a Backend.
//
// Note [Caching allocator policy]
// This is PyTorch's CUDA caching allocator policy, written against the backend
// interface only (raw_alloc/raw_free, events), so the driver and the emulated backend
// share it and tests can run it over a fake backend:
// - Requests round up to 512 B (or to roundup_power2_divisions steps). Requests up to
//   1 MiB come from the small pool, carved out of 2 MiB segments; larger ones from the
//   large pool: up to 10 MiB out of 20 MiB segments, beyond that a segment of the
//   request rounded up to 2 MiB.
// - The smallest cached block that fits is taken (best fit) and split when the rest
//   is worth keeping; freed blocks merge with free neighbours of the same segment.
// - A block belongs to the stream it was allocated on and is reused only by
//   allocations on that stream, so work queued on the stream orders its uses.
// - record_stream() adds a stream that also uses the block. Freeing such a block
//   records an event on each of those streams; the block returns to the cache only
//   when the events have completed. Events are polled at the next malloc, never waited
//   for on the hot path; only empty_cache and the out-of-memory path synchronize.
// - A request of max_split_size or more takes a cached oversize block only when the block
//   exceeds it by less than max_non_split_rounding_mb (20 MiB by default).
// - When raw_alloc fails, cached blocks are released and the allocation retried once
//   (num_alloc_retries); then OutOfMemoryError, after which the allocator is intact.
// - With expandable_segments, the pools grow per stream by mapping pages into a reserved
//   range instead of allocating segments (Note [Expandable segments] in
//   memory/expandable_segment.h); empty_cache unmaps the free pages.
// One mutex guards all state of one device; devices never contend with each other. With
// release_lock_on_cudamalloc it is let go during a raw allocation (nothing of the request
// is in the state yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/allocator.h"
#include "core/stack_trace.h"
#include "ember/cuda_graph.h"
#include "memory/alloc_conf.h"
#include "memory/device_stats.h"
#include "memory/expandable_segment.h"
#include "memory/pointer_map.h"
#include "runtime/backend.h"

namespace ember::detail {

/// The allocator's view of a stream: the backend stream (identity, event recording),
/// its runtime id (for snapshots) and its device.
struct StreamRef {
  BackendStream* native = nullptr;
  uint64_t id = 0;
  int device = 0;
};

class CachingAllocator {
 public:
  CachingAllocator(Backend& backend, int device, AllocatorConfig config);
  /// Returns every cached segment to the backend; blocks still in use are left alone.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// `bytes` bound to `stream`; nullptr for 0 bytes; OutOfMemoryError when impossible.
  void* malloc(size_t bytes, StreamRef stream);
  /// Returns a pointer from malloc (nullptr is ignored); never throws.
  void free(void* ptr) noexcept;
  /// Defers reuse of the block holding `ptr` until `stream`'s work queued before its free.
  void record_stream(void* ptr, StreamRef stream);
  /// Waits for deferred frees, then returns every unused cached segment to the backend.
  void empty_cache();

  /// Caps this process's reserved memory at `fraction` of the device's total.
  void set_memory_fraction(double fraction);
  /// set_allocator_settings: takes `config`'s tunables from now on (Note [Allocator
  /// settings at run time] in alloc_conf.h); PYTORCH_NO_CUDA_MEMORY_CACHING stays as it was.
  void apply_settings(const AllocatorConfig& config);
  void record_history(bool enabled, size_t max_entries);

  int device() const noexcept { return device_; }
  DeviceStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  /// PyTorch snapshot "segments" entries of this device.
  nlohmann::json segments_json() const;
  /// PyTorch snapshot "device_traces" entry of this device (empty unless recording).
  nlohmann::json trace_json() const;

  // ---- Private pools: CUDA graphs' and MemPools' (caching_allocator_graphs.cpp, Note [Graph private pools]) ----
  /// Makes pool `pool` with one use, or counts one more use of it. With `segment_allocator`
  /// (only when making it), the pool's segments come from that allocator instead of the
  /// backend; with `use_on_oom`, an allocation that would raise OutOfMemoryError first takes
  /// a free block of the pool.
  void create_or_incref_pool(cuda::MempoolId pool, std::shared_ptr<Allocator> segment_allocator = {},
                             bool use_on_oom = false);
  /// Routes allocations on streams capturing `capture_id` to private pool `pool`, made on
  /// first use; each call counts one use of the pool. CudaError when already routing to it.
  void begin_allocate_to_pool(cuda::MempoolId pool, uint64_t capture_id);
  /// The same for the allocations of thread `thread` (use_mem_pool).
  void begin_allocate_to_pool(cuda::MempoolId pool, std::thread::id thread);
  /// Stops routing to `pool`; its blocks stay in it.
  void end_allocate_to_pool(cuda::MempoolId pool) noexcept;
  /// Drops one use of `pool`; at none, empty_cache returns its free segments.
  void release_pool(cuda::MempoolId pool) noexcept;
  /// The uses of `pool`; 0 when there is no such pool.
  int pool_use_count(cuda::MempoolId pool) const;

 private:
  // The C++ stack of an allocator call, captured while history is recorded and
  // symbolised only when a snapshot is written. Shared: a block keeps the stack of its
  // allocation (then of its free) and trace entries point at the same one.
  using Context = std::shared_ptr<const StackTrace>;
  struct TraceEntry {
    const char* action;
    uintptr_t address;
    size_t size;
    uint64_t stream_id;
    int64_t time_us;
    Context context;
  };
  struct BlockPool;
  struct Block;
  // A cached block's sort key lives in the set node itself, so a best-fit search
  // touches only tree nodes, not the blocks. Ordered by stream, then size (best fit),
  // then address; size and address compare as one 128-bit key, which compiles to
  // flag arithmetic instead of a second unpredictable branch per tree level.
  struct PoolEntry {
    uintptr_t stream;
    size_t size;
    uintptr_t ptr;
    Block* block;
    bool operator<(const PoolEntry& other) const noexcept {
      using Key = unsigned __int128;
      const Key key = (Key{size} << 64) | ptr;
      const Key other_key = (Key{other.size} << 64) | other.ptr;
      return stream != other.stream ? stream < other.stream : key < other_key;
    }
  };
  using BlockSet = std::set<PoolEntry, std::less<>, RecyclingAllocator<PoolEntry>>;
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested_size = 0;  // what the user asked for, while allocated
    BackendStream* stream = nullptr;
    uint64_t stream_id = 0;
    BlockPool* pool = nullptr;
    Block* prev = nullptr;  // neighbours inside the same segment
    Block* next = nullptr;
    bool allocated = false;
    bool mapped = true;                       // false: reserved pages of an expandable segment
    ExpandableSegment* expandable = nullptr;  // the segment it lies in, if expandable
    int event_count = 0;                      // outstanding events of a deferred free
    std::vector<StreamRef> stream_uses;       // streams added by record_stream
    uint64_t last_use = 0;                    // use_clock_ when it entered the cache
    Context context;                          // while active and recording: who allocated / freed it
    // While cached: the block's entry in pool->blocks, so removing a cached block
    // (merge, release) is an O(1) erase instead of a second tree search.
    BlockSet::iterator cached;

    bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
  };
  struct PrivatePool;
  struct BlockPool {
    BlockSet blocks;
    bool is_small;
    PrivatePool* owner = nullptr;  // the private pool this belongs to; nullptr: the device's own
  };
  // A CUDA graph's or a MemPool's memory (Note [Graph private pools]).
  struct PrivatePool {
    explicit PrivatePool(cuda::MempoolId pool_id, NodeRecycler* nodes)
        : id(pool_id),
          small{BlockSet(RecyclingAllocator<PoolEntry>(nodes)), true, this},
          large{BlockSet(RecyclingAllocator<PoolEntry>(nodes)), false, this} {}
    cuda::MempoolId id;
    int use_count = 1;                             // graphs, captures, MemPools and use_mem_pool guards using it
    size_t segments = 0;                           // live segments (PyTorch's cudaMalloc_count)
    std::shared_ptr<Allocator> segment_allocator;  // where its segments come from; null: the backend
    BlockPool small;
    BlockPool large;
  };
  static PoolEntry entry_of(Block* block) noexcept {
    return {reinterpret_cast<uintptr_t>(block->stream), block->size, reinterpret_cast<uintptr_t>(block->ptr), block};
  }
  /// Puts `block` into its pool's cache and remembers where.
  static void cache_block(Block* block) { block->cached = block->pool->blocks.insert(entry_of(block)).first; }
  struct AllocRequest {
    size_t size = 0;        // rounded block size
    size_t alloc_size = 0;  // segment size if a new segment is needed
    BlockPool* pool = nullptr;
    StreamRef stream;
    Block* block = nullptr;  // the block found or allocated
  };

  // Everything below runs with mutex_ held.
  size_t round_size(size_t bytes) const noexcept;
  static size_t allocation_size(size_t size) noexcept;
  bool get_free_block(AllocRequest& request);
  /// With release_lock_on_cudamalloc, lets go of `lock` (on mutex_) during raw_alloc.
  bool alloc_block(AllocRequest& request, bool is_retry, std::unique_lock<std::mutex>& lock);
  bool release_available_cached_blocks(const AllocRequest& request);
  void release_cached_blocks();
  void release_whole_segments(BlockPool& pool);
  void release_block(Block* block);
  void garbage_collect_cached_blocks();
  Block* use_found_block(AllocRequest& request);
  void free_block(Block* block);
  size_t try_merge_blocks(Block* dst, Block* src, BlockPool& pool);
  bool should_split(const Block* block, size_t size) const noexcept;
  void insert_events(Block* block);
  void process_events();
  void synchronize_and_free_events();
  /// With pool routes: the private pool of a request of a routed thread or capturing stream.
  void route_to_private_pool(AllocRequest& request);
  /// Before OutOfMemoryError: a free block of a use_on_oom pool for `request`.
  bool get_free_use_on_oom_block(AllocRequest& request);
  /// A segment of `size` bytes for `pool` from the backend or the pool's segment allocator;
  /// nullptr when out of memory.
  void* raw_alloc_segment(const BlockPool& pool, size_t size);
  void raw_free_segment(const Block* block);
  void insert_deferred_events();
  void release_freeable_private_pools();
  void note_pool_segment(const BlockPool& pool, int change) noexcept;
  [[noreturn]] void throw_out_of_memory(const AllocRequest& request);
  void record_trace(const char* action, uintptr_t address, size_t size, uint64_t stream_id, Context context);
  /// The calling thread's stack from the allocator's caller outwards (history only).
  static Context capture_context();
  static StatType pool_stat(const BlockPool& pool) noexcept { return pool.is_small ? kSmallPool : kLargePool; }
  /// First block of every segment, by address.
  std::vector<Block*> segment_heads() const;
  Block* new_block();
  void delete_block(Block* block) noexcept;
  // Expandable segments (caching_allocator_expandable.cpp).
  bool alloc_expandable_block(AllocRequest& request);
  Block* find_expandable_block(const AllocRequest& request);
  bool map_block(Block* to_map, size_t size, const StreamRef& stream);
  void unmap_block(Block* block);
  void release_expandable_segment(Block* block);
  size_t merge_unmapped(Block* dst, Block* src) noexcept;  // try_merge_blocks of unmapped ranges
  // Joins src's range to its neighbour dst's; returns the bytes dst gained.
  static size_t absorb(Block* dst, Block* src) noexcept {
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    return src->size;
  }
  BackendEvent* acquire_event(int device);
  void release_event(int device, BackendEvent* event) noexcept;

  Backend& backend_;
  const int device_;
  // Changed only by apply_settings, under mutex_.
  AllocatorConfig config_;
  bool power2_rounding_ = false;  // some roundup_power2_divisions entry is above 1
  bool use_expandable_ = false;   // expandable_segments on a backend with virtual memory
  void adopt_settings(const AllocatorConfig& config);
  mutable std::mutex mutex_;
  DeviceStats stats_;
  NodeRecycler set_nodes_;  // before the pools: their nodes come from it
  BlockPool small_pool_{BlockSet(RecyclingAllocator<PoolEntry>(&set_nodes_)), true};
  BlockPool large_pool_{BlockSet(RecyclingAllocator<PoolEntry>(&set_nodes_)), false};
  PointerMap<Block> allocated_;       // user pointer -> its block
  std::vector<Block*> spare_blocks_;  // recycled Block objects
  // Deferred frees in record order, per stream: events of one stream complete in order,
  // so polling stops at the first incomplete event of each stream.
  struct PendingFree {
    BackendEvent* event;
    int event_device;
    Block* block;
  };
  std::map<BackendStream*, std::deque<PendingFree>> pending_events_;
  std::vector<BackendEvent*> event_pool_;
  size_t reserved_total_ = 0;  // bytes of all segments (mapped bytes of expandable ones)
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments_;
  std::set<Block*> unmapped_blocks_;  // the unmapped ranges of expandable segments
  bool limit_set_ = false;
  size_t allowed_maximum_ = 0;  // with limit_set_: set_per_process_memory_fraction's cap
  uint64_t use_clock_ = 0;      // ticks per cached-block insertion, for GC ages
  bool recording_ = false;
  size_t trace_capacity_ = 0;
  std::deque<TraceEntry> trace_;
  // Note [Graph private pools]
  // Where allocations go instead of the device's pools, in begin order: a capture's (the
  // streams capturing capture_id) or a use_mem_pool guard's (the allocations of `thread`).
  struct PoolRoute {
    cuda::MempoolId pool;
    bool is_capture;
    uint64_t capture_id;
    std::thread::id thread;
  };
  std::vector<PoolRoute> pool_routes_;
  size_t captures_underway_ = 0;  // pool_routes_ of captures
  std::vector<cuda::MempoolId> use_on_oom_pools_;
  std::map<cuda::MempoolId, std::unique_ptr<PrivatePool>> graph_pools_;
  std::vector<Block*> deferred_event_blocks_;  // freed during a capture, used by other streams
};

}  // namespace ember::detail
