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

/// Note [Allocator policy]
/// Which allocator serves which memory (the cpu block cache, the pinned host cache, each
/// device's caching allocator) is the memory layer's policy, not core's: core owns the
/// Allocator interface and this table, and src/memory/allocator_policy.cpp installs it
/// while the library loads, before any other static initializer of the library runs
/// (so a tensor made in one still finds it). make_storage() reads the cpu entry with
/// one load: the small-op path costs what the direct call did.
struct AllocatorPolicy {
  Allocator* cpu = nullptr;                   // pageable host memory (cpu tensors)
  Allocator& (*pinned)() = nullptr;           // pinned host memory (made on first use)
  Allocator& (*device)(int index) = nullptr;  // the allocator of cuda device `index`
};

/// Installs the policy make_storage() uses (the memory layer's, at load time).
void install_allocator_policy(const AllocatorPolicy& policy) noexcept;

}  // namespace ember::detail
