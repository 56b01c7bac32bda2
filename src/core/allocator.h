// Allocator: where a Storage's bytes come from (cpu heap, pinned host, a device's cache).
#pragma once

#include <cstddef>

namespace ember::detail {

class StreamState;

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// `nbytes` bytes; throws OutOfMemoryError when they cannot be had. May return null for 0 bytes.
  virtual void* allocate(size_t nbytes) = 0;
  /// Returns memory from allocate(); never throws.
  virtual void deallocate(void* ptr) noexcept = 0;
  /// Marks `ptr` as used by `stream` so reuse waits for that stream's queued work (optional).
  virtual void record_stream(void* /*ptr*/, StreamState* /*stream*/) {}
};

/// 64-byte aligned host memory.
Allocator& cpu_allocator();

}  // namespace ember::detail
