// StorageImpl: a reference-counted block of memory on one device.
#pragma once

#include <cstddef>
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

 private:
  void* data_;
  size_t nbytes_;
  Device device_;  // always with an index for cuda
  Allocator* allocator_;
  bool pinned_;
};

/// Allocates `nbytes` on `device` (an indexed cuda device or cpu), pinned if asked (cpu only).
std::shared_ptr<StorageImpl> make_storage(size_t nbytes, Device device, bool pinned = false);

}  // namespace ember::detail
