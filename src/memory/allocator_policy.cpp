// Installs the memory layer's allocators into core (Note [Allocator policy] in
// core/allocator.h): cpu tensors from the cpu block cache, pinned ones from the caching
// host allocator, a device's from its caching allocator.
#include "core/allocator.h"
#include "memory/memory.h"

namespace ember::detail {
namespace {

struct InstallAllocatorPolicy {
  InstallAllocatorPolicy() noexcept {
    install_allocator_policy(AllocatorPolicy{&cpu_allocator(), &pinned_allocator, &cuda_allocator});
  }
};

// Priority 101, the first one a program may use: before the library's other static
// initializers, any of which may make a tensor.
[[gnu::init_priority(101)]] const InstallAllocatorPolicy g_install;

}  // namespace
}  // namespace ember::detail
