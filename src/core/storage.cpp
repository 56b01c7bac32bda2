#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "ember/errors.h"
#include "memory/memory.h"

namespace ember::detail {

namespace {
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t rounded = (nbytes + 63) & ~size_t{63};
    void* ptr = std::aligned_alloc(64, rounded);
    EMBER_CHECK(ptr != nullptr, OutOfMemoryError, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
                nbytes, " bytes.");
    return ptr;
  }
  void deallocate(void* ptr) noexcept override { std::free(ptr); }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

std::shared_ptr<StorageImpl> make_storage(size_t nbytes, Device device, bool pinned) {
  if (device.is_cpu()) {
    Allocator& allocator = pinned ? pinned_allocator() : cpu_allocator();
    return std::make_shared<StorageImpl>(nbytes, Device(kCPU), allocator, pinned);
  }
  EMBER_ASSERT(device.has_index());
  EMBER_CHECK(!pinned, ValueError, "Only cpu tensors can be pinned, but got device ", device);
  return std::make_shared<StorageImpl>(nbytes, device, cuda_allocator(device.index()), false);
}

}  // namespace ember::detail
