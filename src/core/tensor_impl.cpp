#include "core/tensor_impl.h"

#include <algorithm>

#include "core/checked_math.h"
#include "ember/errors.h"

namespace ember::detail {

namespace {
bool compute_contiguous(const IntList& sizes, const IntList& strides) {
  for (int64_t s : sizes) {
    if (s == 0) return true;  // an empty tensor is contiguous whatever its strides
  }
  int64_t expected = 1;  // no overflow: the product of nonzero sizes is the checked numel
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}
}  // namespace

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, DType dtype, IntList sizes, IntList strides,
                       int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset) {
  numel_ = 1;
  if (std::find(sizes_.begin(), sizes_.end(), 0) != sizes_.end()) {
    numel_ = 0;
  } else {
    for (int64_t s : sizes_) {
      EMBER_CHECK(!mul_overflows(numel_, s, &numel_), ValueError, "numel: integer multiplication overflow");
    }
  }
  contiguous_ = compute_contiguous(sizes_, strides_);
}

void TensorImpl::set_data(const TensorImpl& other) {
  if (&other == this) return;
  storage_ = other.storage_;
  dtype_ = other.dtype_;
  sizes_ = other.sizes_;
  strides_ = other.strides_;
  offset_ = other.offset_;
  numel_ = other.numel_;
  contiguous_ = other.contiguous_;
}

IntList contiguous_strides(const IntList& sizes) {
  IntList strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // Can pass int64 only beside a 0 size (no element is addressed): wraps like PyTorch.
    stride = wrapping_mul(stride, std::max<int64_t>(sizes[i], 1));
  }
  return strides;
}

int64_t checked_numel(const IntList& sizes) {
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, ValueError, "Trying to create tensor with negative dimension ", s, ": ", IntListPrinter{sizes});
  }
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) {
    EMBER_CHECK(!mul_overflows(n, s, &n), ValueError,
                "Storage size calculation overflowed with sizes=", IntListPrinter{sizes});
  }
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dims -1 and 0
  EMBER_CHECK(dim >= -n && dim < n, IndexError, "Dimension out of range (expected to be in range of [", -n, ", ", n - 1,
              "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::ostream& operator<<(std::ostream& out, const IntListPrinter& p) {
  out << '[';
  for (size_t i = 0; i < p.values.size(); ++i) out << (i ? ", " : "") << p.values[i];
  return out << ']';
}

Tensor make_tensor(const IntList& sizes, DType dtype, Device device, bool pinned) {
  int64_t numel = checked_numel(sizes);
  size_t esize = element_size(dtype);
  int64_t nbytes = 0;
  EMBER_CHECK(!mul_overflows(numel, static_cast<int64_t>(esize), &nbytes), ValueError,
              "Storage size calculation overflowed with sizes=", IntListPrinter{sizes});
  EMBER_CHECK(numel == 0 || static_cast<uint64_t>(numel) <= (uint64_t{1} << 62) / esize, OutOfMemoryError,
              "Trying to allocate a tensor of shape ", IntListPrinter{sizes}, ", which is too large");
  auto storage = make_storage(static_cast<size_t>(numel) * esize, device, pinned);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, contiguous_strides(sizes), 0));
}

Tensor make_view(const Tensor& base, IntList sizes, IntList strides, int64_t offset) {
  return Tensor(
      std::make_shared<TensorImpl>(base.impl()->storage(), base.dtype(), std::move(sizes), std::move(strides), offset));
}

}  // namespace ember::detail
