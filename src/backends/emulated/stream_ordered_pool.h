// StreamOrderedPool: an emulated device's default memory pool, for cudaMallocAsync /
// cudaFreeAsync semantics (backend:cudaMallocAsync).
//
// Note [Emulated stream-ordered pool]
// A free is an operation on its stream. A freed block is at once reusable by later
// allocations on the same stream (stream order puts them after the free), and by other
// streams only once the stream has reached the free (the pool's opportunistic reuse);
// the backend queues a host function behind the free that marks that point. Blocks stay
// in the pool (reserved, as with a release threshold of UINT64_MAX, PyTorch's setting)
// until trim() gives them back to the device; when the device is full, an allocation
// first gives back the blocks every stream may reuse and tries again. A device in an
// error state skips its streams' work, markers included, so trim_pool, which runs after
// a synchronization (reset_device's included), treats every free before it as reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backends/emulated/device_memory.h"
#include "runtime/backend.h"

namespace ember::detail::emulated {

class StreamOrderedPool {
 public:
  explicit StreamOrderedPool(DeviceMemory& memory) : memory_(memory) {}
  StreamOrderedPool(const StreamOrderedPool&) = delete;
  StreamOrderedPool& operator=(const StreamOrderedPool&) = delete;

  /// `bytes` for work on `stream`; nullptr when the device has too little free.
  void* allocate(size_t bytes, const void* stream);
  /// Frees `ptr` on `stream`; returns the generation to pass to reached() once the stream
  /// has reached the free. False (and nothing changes) when `ptr` is not allocated here.
  bool free(void* ptr, const void* stream, uint64_t& generation);
  /// The free of `ptr` numbered `generation` has been reached by its stream.
  void reached(void* ptr, uint64_t generation);
  Backend::PoolUsage usage() const;
  void reset_peaks();
  /// Frees so far; a synchronization after reading it has passed each of them.
  uint64_t frees() const;
  /// Gives every free block that all streams may reuse back to the device, counting the
  /// first `passed` frees (frees() before a synchronization) as reached even where a
  /// failed device skipped their markers.
  void trim(uint64_t passed = 0);

 private:
  struct Block {
    size_t size;
    bool allocated;
    const void* free_stream;  // while free: the stream whose order it is free in
    bool reached;             // while free: reusable by every stream
    uint64_t generation;      // frees so far
    uint64_t freed_at;        // while free: frees_ at its free
  };
  void release_reached();  // mutex_ held
  void add_reserved(int64_t bytes);
  void add_used(int64_t bytes);

  DeviceMemory& memory_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
  std::multimap<size_t, void*> free_by_size_;
  Backend::PoolUsage usage_;
  uint64_t frees_ = 0;  // frees of all blocks so far
};

}  // namespace ember::detail::emulated
