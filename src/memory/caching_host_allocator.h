// CachingHostAllocator: the cache of pinned (page-locked) host blocks.
//
// Note [Pinned block reuse]
// A pinned buffer is typically the source or target of a non_blocking copy that is
// still queued when the tensor dies. Blocks are cached in power-of-two size classes;
// record_stream(ptr, stream) marks a stream that used the block, and freeing it then
// records one event per such stream. The block is handed out again only after all of
// them have completed, found by polling at the next allocation (never a wait).
// With pinned_use_cuda_host_register, blocks are registered host memory (host_register.h)
// where the backend can register it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/device_stats.h"
#include "memory/pointer_map.h"
#include "runtime/backend.h"

namespace ember::detail {

class CachingHostAllocator {
 public:
  /// `use_host_register` and `register_threads`: PYTORCH_CUDA_ALLOC_CONF's pinned options.
  explicit CachingHostAllocator(Backend& backend, bool use_host_register = false, size_t register_threads = 1)
      : backend_(backend), use_host_register_(use_host_register), register_threads_(register_threads) {}
  /// Releases the free cached blocks; blocks still in use are left alone.
  ~CachingHostAllocator();
  CachingHostAllocator(const CachingHostAllocator&) = delete;
  CachingHostAllocator& operator=(const CachingHostAllocator&) = delete;

  /// At least `bytes` of pinned memory; nullptr for 0 bytes; OutOfMemoryError on failure.
  void* malloc(size_t bytes);
  /// Returns a pointer from malloc (nullptr is ignored); never throws.
  void free(void* ptr) noexcept;
  /// `stream` used the block: it is reused only after the stream's work queued before the free.
  void record_stream(void* ptr, StreamRef stream);
  /// Returns the free cached blocks to the backend (blocks awaiting events stay).
  void empty_cache();
  /// host_memory_stats() keys.
  std::map<std::string, int64_t> stats() const;

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;  // its size class, a power of two
    bool allocated = false;
    bool registered = false;  // host_register'ed memory rather than pinned_alloc's
    int event_count = 0;
    std::vector<StreamRef> stream_uses;
  };
  struct PendingFree {
    BackendEvent* event;
    Block* block;
  };
  static constexpr size_t kNumClasses = 64;

  // With mutex_ held.
  void process_events();
  void release_free_blocks();
  void make_available(Block* block);

  Backend& backend_;
  const bool use_host_register_;
  const size_t register_threads_;
  mutable std::mutex mutex_;
  std::array<std::vector<Block*>, kNumClasses> free_blocks_;  // by log2 of the size class
  PointerMap<Block> blocks_;                                  // every block, in use or cached
  std::deque<PendingFree> pending_;  // record order; polled until the first incomplete one
  Stat allocation_, segment_, allocated_bytes_, reserved_bytes_;
  int64_t num_host_alloc_ = 0;
  int64_t num_host_free_ = 0;
};

}  // namespace ember::detail
