// CachingHostAllocator: the cache of pinned (page-locked) host blocks.
//
// Note [Pinned block reuse]
// A pinned buffer is typically the source or target of a non_blocking copy that is
// still queued when the tensor dies. Blocks are cached in power-of-two size classes;
// record_stream(ptr, stream) marks a stream that used the block, and freeing it then
// records one event per such stream. The block is handed out again only after all of
// them have completed, found by polling at the next allocation (never a wait).
// With pinned_use_cuda_host_register, blocks are registered host memory (host_register.h)
// where the backend can register it. With pinned_use_background_threads, as PyTorch's, a
// thread of the allocator polls the events (every 100 us while any are pending; it waits
// without polling otherwise) and malloc never does: a free whose streams are done becomes
// reusable without an allocation to notice it, and malloc's path has no event queries.
#pragma once

#include <chrono>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/device_stats.h"
#include "memory/pointer_map.h"
#include "runtime/backend.h"

namespace ember::detail {

class CachingHostAllocator {
 public:
  /// `use_host_register`, `register_threads` and `background_thread`: PYTORCH_ALLOC_CONF's
  /// pinned options.
  explicit CachingHostAllocator(Backend& backend, bool use_host_register = false, size_t register_threads = 1,
                                bool background_thread = false);
  /// Stops the background thread, then releases the free cached blocks; blocks still in
  /// use are left alone.
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
  /// set_allocator_settings' pinned options, for the blocks made from now on.
  void set_register_options(bool use_host_register, size_t register_threads);
  /// host_memory_stats() keys.
  std::map<std::string, int64_t> stats() const;
  /// Frees still waiting for their streams' events.
  size_t pending_frees() const;
  /// With the background thread: returns true once it has polled every event recorded
  /// before the call at least once, false if that takes longer than `limit` (tests: a
  /// thread that never runs fails the test instead of hanging it).
  bool wait_for_background_pass(std::chrono::milliseconds limit = std::chrono::seconds(30));

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
  void background_loop();

  Backend& backend_;
  bool use_host_register_;  // with register_threads_: changed under mutex_
  size_t register_threads_;
  mutable std::mutex mutex_;
  std::array<std::vector<Block*>, kNumClasses> free_blocks_;  // by log2 of the size class
  PointerMap<Block> blocks_;                                  // every block, in use or cached
  std::deque<PendingFree> pending_;                           // record order; polled until the first incomplete one
  Stat allocation_, segment_, allocated_bytes_, reserved_bytes_;
  int64_t num_host_alloc_ = 0;
  int64_t num_host_free_ = 0;
  // pinned_use_background_threads (under mutex_): the thread waits on pending_changed_
  // while nothing is pending, counts its polls in background_passes_ (passes_changed_).
  const bool background_events_;
  bool stopping_ = false;
  uint64_t background_passes_ = 0;
  std::condition_variable pending_changed_;
  std::condition_variable passes_changed_;
  std::thread background_;  // last: started when the rest is built
};

}  // namespace ember::detail
