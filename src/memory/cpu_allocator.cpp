// The cpu allocator: 64-byte aligned host memory over glibc, with a block cache for large
// blocks and a per-thread cache for small ones. The memory layer installs it into core as
// the cpu policy (allocator_policy.cpp).
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include "ember/errors.h"
#include "memory/memory.h"

namespace ember::detail {

namespace {

// Note [Cpu block cache]
// A training step allocates the same large temporaries every iteration (im2col columns,
// activations, their gradients). glibc serves many of them with fresh mmaps and returns
// them with munmap, so each step faults zero-filled pages in again. Freed blocks of at
// least kMinCachedBytes are kept, keyed by their size rounded up to kCacheGranule, and
// handed out again to a request of the same rounded size; at most kMaxCachedBytes are
// kept (the smallest kept blocks are released first). Smaller blocks go straight to
// glibc, whose heap recycles them. Not under AddressSanitizer, which must see every free
// to report a use after it.
constexpr size_t kMinCachedBytes = size_t{128} << 10;
constexpr size_t kCacheGranule = size_t{16} << 10;
constexpr size_t kMaxCachedBytes = size_t{256} << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheBlocks = false;
#else
constexpr bool kCacheBlocks = true;
#endif

// Note [Cpu small-block cache]
// A small op's output (a few dozen bytes) costs glibc's aligned allocation path, several
// hundred instructions each way (memalign is not served from its per-thread cache). Each
// thread keeps up to kSmallDepth freed blocks per 64-byte size class up to
// kMaxSmallBytes, and serves a request of that class from them without a lock. A block
// goes to the class its usable size covers, so a block freed on another thread than the
// one that made it is served correctly; a full class frees to glibc, so a thread that
// only frees (a consumer) holds at most kSmallClasses * kSmallDepth blocks. The cache
// is trivially destructible, so frees after its thread has flushed it at exit (static
// tensors) go to glibc.
constexpr size_t kMaxSmallBytes = 1024;
constexpr size_t kSmallClasses = kMaxSmallBytes / 64;
constexpr int kSmallDepth = 32;

struct SmallBlockCache {
  void* blocks[kSmallClasses][kSmallDepth];
  int count[kSmallClasses];
  bool closed;  // the thread is exiting: no more caching
};
thread_local SmallBlockCache small_cache{};

struct SmallBlockCacheFlush {
  ~SmallBlockCacheFlush() {
    small_cache.closed = true;
    for (size_t c = 0; c < kSmallClasses; ++c) {
      while (small_cache.count[c] > 0) std::free(small_cache.blocks[c][--small_cache.count[c]]);
    }
  }
};
thread_local SmallBlockCacheFlush small_cache_flush;

void* take_small(size_t rounded) noexcept {
  SmallBlockCache& cache = small_cache;
  size_t c = rounded / 64 - 1;
  if (cache.count[c] == 0) return nullptr;
  return cache.blocks[c][--cache.count[c]];
}

bool keep_small(void* ptr, size_t usable) noexcept {
  SmallBlockCache& cache = small_cache;
  if (cache.closed) return false;
  (void)&small_cache_flush;  // odr-use: constructs the flusher of this thread
  size_t c = std::min(usable, kMaxSmallBytes) / 64 - 1;
  if (cache.count[c] == kSmallDepth) return false;
  cache.blocks[c][cache.count[c]++] = ptr;
  return true;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t rounded = (nbytes + 63) & ~size_t{63};
    if (kCacheBlocks && rounded <= kMaxSmallBytes) {
      if (void* ptr = take_small(rounded)) return ptr;
    }
    const bool cacheable = kCacheBlocks && rounded >= kMinCachedBytes;
    if (cacheable) {
      rounded = (rounded + kCacheGranule - 1) & ~(kCacheGranule - 1);
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = free_.find(rounded); it != free_.end()) {
        void* ptr = it->second;
        free_.erase(it);
        cached_bytes_ -= rounded;
        live_.emplace(ptr, rounded);
        return ptr;
      }
    }
    void* ptr = std::aligned_alloc(64, rounded);
    EMBER_CHECK(ptr != nullptr, OutOfMemoryError, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
                nbytes, " bytes.");
    if (cacheable) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.emplace(ptr, rounded);
    }
    return ptr;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    const size_t usable = kCacheBlocks ? malloc_usable_size(ptr) : 0;
    if (kCacheBlocks && usable >= 64 && usable < 2 * kMaxSmallBytes && keep_small(ptr, usable)) return;
    if (kCacheBlocks && usable >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = live_.find(ptr); it != live_.end()) {
        const size_t size = it->second;
        live_.erase(it);
        if (size <= kMaxCachedBytes) {
          while (cached_bytes_ + size > kMaxCachedBytes) {
            auto smallest = free_.begin();
            cached_bytes_ -= smallest->first;
            std::free(smallest->second);
            free_.erase(smallest);
          }
          free_.emplace(size, ptr);
          cached_bytes_ += size;
          return;
        }
      }
    }
    std::free(ptr);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;  // cacheable blocks in use -> rounded size
  std::multimap<size_t, void*> free_;       // kept blocks by rounded size
  size_t cached_bytes_ = 0;
};
}  // namespace

Allocator& cpu_allocator() {
  // Never destroyed: tensors held in static objects may be freed after it would be.
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}

}  // namespace ember::detail
