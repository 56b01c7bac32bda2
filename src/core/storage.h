// StorageImpl: a reference-counted block of memory on one device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "ember/device.h"

namespace ember::detail {

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device, Allocator& allocator, bool pinned)
      : data_(allocator.allocate(nbytes)), nbytes_(nbytes), device_(device), allocator_(&allocator), pinned_(pinned) {}
  ~StorageImpl() { allocator_->deallocate(data_); }
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const noexcept { return data_; }
  size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  bool pinned() const noexcept { return pinned_; }
  Allocator& allocator() const noexcept { return *allocator_; }
  /// The version counter autograd checks saved tensors against: every in-place op on any
  /// view of this storage bumps it (PyTorch shares one counter between a base and its views).
  uint32_t version() const noexcept { return version_.load(std::memory_order_relaxed); }
  void bump_version() noexcept { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;  // always with an index for cuda
  Allocator* allocator_;
  bool pinned_;
  std::atomic<uint32_t> version_{0};
};

/// Allocates `nbytes` on `device` (an indexed cuda device or cpu), pinned if asked (cpu only).
std::shared_ptr<StorageImpl> make_storage(size_t nbytes, Device device, bool pinned = false);

}  // namespace ember::detail
