// TensorImpl: sizes, strides, offset and dtype over a shared StorageImpl.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>

#include "core/storage.h"
#include "ember/tensor.h"

namespace ember::detail {

/// What a tensor carries for autograd (defined in src/autograd); absent for tensors that
/// autograd never saw, so plain tensors pay one null pointer.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
  virtual bool requires_grad() const = 0;
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, IntList sizes, IntList strides, int64_t offset);

  const std::shared_ptr<StorageImpl>& storage() const noexcept { return storage_; }
  DType dtype() const noexcept { return dtype_; }
  const IntList& sizes() const noexcept { return sizes_; }
  const IntList& strides() const noexcept { return strides_; }
  int64_t offset() const noexcept { return offset_; }
  int64_t numel() const noexcept { return numel_; }
  int64_t dim() const noexcept { return static_cast<int64_t>(sizes_.size()); }
  bool is_contiguous() const noexcept { return contiguous_; }
  Device device() const noexcept { return storage_->device(); }
  /// Address of element 0.
  void* data() const noexcept {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }
  /// Takes `other`'s storage, dtype, sizes, strides and offset, keeping this impl's identity
  /// (and anything else it carries): how nn::Module::to() moves a parameter in place, so
  /// that handles to it (an optimizer's) see the new data.
  void set_data(const TensorImpl& other);

  AutogradMetaInterface* autograd_meta() const noexcept { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaInterface> meta) noexcept { autograd_meta_ = std::move(meta); }
  /// Whether the tensor takes part in autograd (grad mode is checked by the caller).
  bool requires_grad() const { return autograd_meta_ && autograd_meta_->requires_grad(); }

 private:
  std::shared_ptr<StorageImpl> storage_;
  DType dtype_;
  IntList sizes_;
  IntList strides_;
  int64_t offset_;
  int64_t numel_;
  bool contiguous_;
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
};

/// Prints a shape as "[2, 3]" in messages.
struct IntListPrinter {
  const IntList& values;
};
std::ostream& operator<<(std::ostream& out, const IntListPrinter& p);

/// Row-major strides for `sizes`.
IntList contiguous_strides(const IntList& sizes);
/// Product of sizes; throws ValueError for negative sizes.
int64_t checked_numel(const IntList& sizes);
/// Wraps a possibly negative dim into [0, ndim); IndexError like PyTorch's otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim);

/// A new contiguous tensor.
Tensor make_tensor(const IntList& sizes, DType dtype, Device device, bool pinned = false);
/// A view sharing `base`'s storage.
Tensor make_view(const Tensor& base, IntList sizes, IntList strides, int64_t offset);

}  // namespace ember::detail
