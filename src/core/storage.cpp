#include "core/storage.h"

#include "ember/errors.h"

namespace ember::detail {

namespace {
// Installed by the memory layer (Note [Allocator policy] in core/allocator.h).
AllocatorPolicy g_policy;
}  // namespace

void install_allocator_policy(const AllocatorPolicy& policy) noexcept { g_policy = policy; }

std::shared_ptr<StorageImpl> make_storage(size_t nbytes, Device device, bool pinned) {
  if (device.is_cpu()) {
    Allocator* allocator = pinned ? &g_policy.pinned() : g_policy.cpu;
    EMBER_ASSERT(allocator != nullptr);  // the memory layer installs its policy at load time
    return std::make_shared<StorageImpl>(nbytes, Device(kCPU), *allocator, pinned);
  }
  EMBER_ASSERT(device.has_index());
  EMBER_CHECK(!pinned, ValueError, "Only cpu tensors can be pinned, but got device ", device);
  return std::make_shared<StorageImpl>(nbytes, device, g_policy.device(device.index()), false);
}

}  // namespace ember::detail
