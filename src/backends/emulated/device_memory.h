// DeviceMemory: an emulated device's memory, a capacity-limited arena on the host heap.
//
// Allocations come from mmap with MAP_NORESERVE (large ones) or the heap (small ones);
// pages are never touched here, so an 8 GiB device costs no resident memory until a
// kernel writes to it. Allocation fails (nullptr) when the request exceeds the capacity
// left, as cudaMalloc does, so the caching allocator sees a GPU's behaviour, or when the
// host cannot provide the memory (recorded, for the OutOfMemoryError message).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace ember::detail::emulated {

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t capacity) : capacity_(capacity) {}
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  /// 512-byte aligned memory, or nullptr when less than `bytes` is free or when the host
  /// cannot back it (then host_failure() names the request).
  void* allocate(size_t bytes);
  /// Bytes of the last request that failed for want of host memory although the capacity
  /// had room; 0 when the last failure (or none) was the capacity's.
  size_t host_failure() const;
  /// False when `ptr` did not come from allocate().
  bool release(void* ptr);
  /// {free, total}.
  std::pair<size_t, size_t> info() const;

  // Virtual memory (Note [Emulated virtual memory] in device_memory.cpp).
  /// `bytes` of inaccessible host address space; nullptr when the host has none.
  void* reserve(size_t bytes);
  /// Makes [ptr, ptr + bytes) of a reservation usable, counted against the capacity;
  /// false when the capacity has less than `bytes` left or the range is not reserved.
  bool map(void* ptr, size_t bytes);
  /// Returns a mapped range's pages and capacity; false when it is not a mapped range.
  bool unmap(void* ptr, size_t bytes);
  /// False when `ptr` is not a reservation or some of it is still mapped.
  bool release_reservation(void* ptr, size_t bytes);
  /// cuMemSetAccess: device `peer` may access the mapped range at `ptr` (nullptr: every
  /// mapped range). The owner always may.
  void grant_access(void* ptr, int peer);
  /// False when [ptr, ptr + bytes) overlaps a mapped range that `peer` was not granted.
  bool accessible_from(const void* ptr, size_t bytes, int peer) const;
  /// True when `ptr` lies in an allocation or a reservation of this device.
  bool owns(const void* ptr) const;
  /// True while some range is mapped: the cheap test before accessible_from.
  bool any_mapped() const noexcept { return mapped_count_.load(std::memory_order_acquire) > 0; }
  size_t capacity() const noexcept { return capacity_; }

 private:
  struct Block {
    size_t bytes;   // counted against the capacity
    size_t mapped;  // mmap length, 0 for heap blocks
  };
  const size_t capacity_;
  mutable std::mutex mutex_;
  size_t used_ = 0;
  size_t host_failure_ = 0;
  std::unordered_map<void*, Block> blocks_;
  std::unordered_map<void*, size_t> reservations_;  // start -> length
  std::unordered_map<void*, size_t> mapped_;        // mapped range start -> length
  std::unordered_map<void*, uint64_t> granted_;     // mapped range start -> peers granted, by bit
  std::atomic<size_t> mapped_count_{0};             // mapped_.size()
};

/// Page-locked host memory, emulated: heap memory that is tracked so that it can be told
/// apart and freed with its own call, as cudaHostAlloc memory is.
class PinnedMemory {
 public:
  void* allocate(size_t bytes);
  bool release(void* ptr);
  /// cudaHostRegister: false when the range overlaps a registered one.
  bool register_range(void* ptr, size_t bytes);
  /// cudaHostUnregister: false when `ptr` does not start a registered range.
  bool unregister_range(void* ptr);
  /// Bytes registered now.
  size_t registered_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> blocks_;
  std::map<const char*, size_t> registered_;  // by start address
};

}  // namespace ember::detail::emulated
