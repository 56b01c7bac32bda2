// The view ops: tensors sharing their input's storage, made without launching work, each
// recorded for autograd through the op layer's seam (Note [Recording ops] in recording.h).
#include <algorithm>
#include <numeric>

#include "core/checked_math.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ops/op_entry.h"

namespace ember {

using detail::add_overflows;
using detail::IntListPrinter;
using detail::make_view;
using detail::mul_overflows;
using detail::wrap_dim;

namespace {
using ember::detail::Attrs;
using ember::detail::Formula;

// A view of `self`, recorded as `formula` when autograd needs it (Note [Recording ops]).
Tensor recorded_view(Formula formula, const Tensor& self, IntList sizes, IntList strides, int64_t offset,
                     Attrs attrs = {}) {
  Tensor out = make_view(self, std::move(sizes), std::move(strides), offset);
  ember::detail::note_view(self, out);
  if (ember::detail::should_record(self)) ember::detail::record(formula, {self}, out, std::move(attrs));
  return out;
}
}  // namespace

Tensor Tensor::as_strided(const IntList& sizes, const IntList& strides, int64_t offset) const {
  EMBER_CHECK(sizes.size() == strides.size(), ValueError, "mismatch in length of strides and shape");
  EMBER_CHECK(offset >= 0, ValueError, "Tensor: invalid storage offset ", offset);
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK(sizes[i] >= 0, ValueError, "Trying to create tensor with negative dimension ", sizes[i]);
    EMBER_CHECK(strides[i] >= 0, ValueError,
                "as_strided: Negative strides are not supported at the moment, got strides: ", IntListPrinter{strides});
    empty |= sizes[i] == 0;
  }
  // The storage needed: offset + 1 + sum((size - 1) * stride) elements, whose bytes must
  // fit in int64 (PyTorch's computeStorageNbytes), checked.
  bool overflow = false;
  for (size_t i = 0; i < sizes.size() && !empty; ++i) {
    int64_t extent = 0;
    overflow |= mul_overflows(sizes[i] - 1, strides[i], &extent) || add_overflows(last, extent, &last);
  }
  int64_t required = 0, bytes = 0;
  overflow |=
      add_overflows(last, 1, &required) || mul_overflows(required, static_cast<int64_t>(element_size()), &bytes);
  EMBER_CHECK(empty || !overflow, ValueError, "Storage size calculation overflowed with sizes=", IntListPrinter{sizes},
              " and strides=", IntListPrinter{strides});
  int64_t storage_elements = static_cast<int64_t>(impl_->storage()->nbytes() / element_size());
  EMBER_CHECK(empty || required <= storage_elements, ValueError, "setStorage: sizes ", IntListPrinter{sizes},
              ", strides ", IntListPrinter{strides}, ", storage offset ", offset, " require a storage of ", required,
              " elements, but the storage has ", storage_elements);
  return recorded_view(Formula::AsStrided, *this, sizes, strides, offset,
                       detail::AsStridedArgs{sizes, strides, offset});
}

namespace {

// offset + index * stride; ValueError when it leaves int64 (only as_strided views get there).
int64_t checked_offset(int64_t offset, int64_t index, int64_t stride) {
  int64_t step = 0, out = 0;
  EMBER_CHECK(!detail::mul_overflows(index, stride, &step) && !detail::add_overflows(offset, step, &out), ValueError,
              "storage offset ", offset, " + ", index, " * stride ", stride, " overflows int64");
  return out;
}

// Infers one -1 entry of a requested shape, as view/reshape do.
IntList infer_shape(const IntList& shape, int64_t numel) {
  IntList out = shape;
  int64_t known = 1;
  int infer = -1;
  bool overflow = false, zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, ValueError, "only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else {
      EMBER_CHECK(shape[i] >= 0, ValueError, "invalid shape dimension ", shape[i]);
      overflow |= mul_overflows(known, shape[i], &known);
      zero |= shape[i] == 0;
    }
  }
  if (zero) known = 0;
  // A product past int64 cannot equal (or divide) numel: a mismatch.
  EMBER_CHECK(!overflow || zero, ValueError, "shape '", IntListPrinter{shape}, "' is invalid for input of size ",
              numel);
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, ValueError, "shape '", IntListPrinter{shape},
                "' is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    EMBER_CHECK(known == numel, ValueError, "shape '", IntListPrinter{shape}, "' is invalid for input of size ", numel);
  }
  return out;
}

// Strides for viewing (sizes, strides) as `shape` without copying, if possible
// (PyTorch's computeStride): groups of old dims that are contiguous among themselves
// map onto groups of new dims.
bool view_strides(const IntList& sizes, const IntList& strides, const IntList& shape, IntList& out) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  out.assign(shape.size(), 0);
  if (sizes.empty()) {  // a 0-dim tensor views as any shape of one element
    out.assign(shape.size(), 1);
    return true;
  }
  if (numel == 0) {
    out = detail::contiguous_strides(shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= sizes[tensor_d];
    if (tensor_d == 0 || (sizes[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace

Tensor Tensor::view(const IntList& shape) const {
  IntList target = infer_shape(shape, numel());
  IntList new_strides;
  EMBER_CHECK(view_strides(sizes(), strides(), target, new_strides), ValueError,
              "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
              "two contiguous subspaces). Use .reshape(...) instead.");
  return recorded_view(Formula::View, *this, target, new_strides, storage_offset());
}

Tensor Tensor::reshape(const IntList& shape) const {
  IntList target = infer_shape(shape, numel());
  IntList new_strides;
  if (view_strides(sizes(), strides(), target, new_strides)) {
    return recorded_view(Formula::View, *this, target, new_strides, storage_offset());
  }
  return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  const int64_t n = dim();
  start_dim = wrap_dim(start_dim, n);
  end_dim = wrap_dim(end_dim, n);
  EMBER_CHECK(start_dim <= end_dim, ValueError, "flatten() has invalid args: start_dim cannot come after end_dim");
  if (n == 0) return reshape({1});
  if (start_dim == end_dim) return *this;
  IntList shape(sizes().begin(), sizes().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= sizes()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() <= 2, ValueError, "t() expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  Tensor out = ember::detail::op_entry(
      {.formula = Formula::T}, [](const Tensor& self) { return self.dim() < 2 ? self : self.transpose(0, 1); }, *this);
  if (!out.is_same(*this)) ember::detail::note_view(*this, out);
  return out;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t n = dim();
  dim0 = wrap_dim(dim0, n);
  dim1 = wrap_dim(dim1, n);
  IntList s = sizes(), st = strides();
  if (n > 0) {
    std::swap(s[dim0], s[dim1]);
    std::swap(st[dim0], st[dim1]);
  }
  return recorded_view(Formula::Transpose, *this, s, st, storage_offset(), detail::TransposeArgs{dim0, dim1});
}

Tensor Tensor::permute(const IntList& dims) const {
  int64_t n = dim();
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == n, ValueError,
              "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired "
              "ordering of dimensions i.e. input.dim() = ",
              n, " is not equal to len(dims) = ", dims.size());
  IntList s(n), st(n);
  std::vector<bool> seen(n, false);
  detail::PermuteArgs attrs;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n);
    EMBER_CHECK(!seen[d], ValueError, "permute(): duplicate dims are not allowed.");
    seen[d] = true;
    s[i] = sizes()[d];
    st[i] = strides()[d];
    attrs.dims.push_back(d);
  }
  return recorded_view(Formula::Permute, *this, s, st, storage_offset(), std::move(attrs));
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  EMBER_CHECK(this->dim() > 0, IndexError, "select() cannot be applied to a 0-dim tensor.");
  dim = wrap_dim(dim, this->dim());
  int64_t size = sizes()[dim];
  EMBER_CHECK(index >= -size && index < size, IndexError, "select(): index ", index,
              " out of range for tensor of size ", IntListPrinter{sizes()}, " at dimension ", dim);
  if (index < 0) index += size;
  IntList s = sizes(), st = strides();
  int64_t offset = checked_offset(storage_offset(), index, st[dim]);
  s.erase(s.begin() + dim);
  st.erase(st.begin() + dim);
  return recorded_view(Formula::Select, *this, s, st, offset, detail::SelectArgs{dim, index});
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  EMBER_CHECK(this->dim() > 0, IndexError, "slice() cannot be applied to a 0-dim tensor.");
  EMBER_CHECK(step > 0, ValueError, "slice step must be positive, but got ", step);
  dim = wrap_dim(dim, this->dim());
  int64_t size = sizes()[dim];
  // Python slice semantics: negative bounds count from the end, out-of-range bounds clamp.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  IntList s = sizes(), st = strides();
  s[dim] = end > start ? (end - start - 1) / step + 1 : 0;  // ceil((end - start) / step) without overflow
  int64_t offset = checked_offset(storage_offset(), start, st[dim]);
  // With at most one element the stride addresses nothing and is kept when the step's
  // would overflow.
  int64_t stride = 0;
  if (!mul_overflows(st[dim], step, &stride)) {
    st[dim] = stride;
  } else {
    EMBER_CHECK(s[dim] <= 1, ValueError, "slice: the stride ", st[dim], " times the step ", step, " overflows int64");
  }
  return recorded_view(Formula::Slice, *this, s, st, offset, detail::SliceArgs{dim, start, end, step});
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  EMBER_CHECK(this->dim() > 0, IndexError, "narrow() cannot be applied to a 0-dim tensor.");
  dim = wrap_dim(dim, this->dim());
  int64_t size = sizes()[dim];
  EMBER_CHECK(start >= -size && start <= size, IndexError, "start out of range (expected to be in range of [", -size,
              ", ", size, "], but got ", start, ")");
  if (start < 0) start += size;
  EMBER_CHECK(length >= 0, ValueError, "narrow(): length must be non-negative.");
  EMBER_CHECK(length <= size - start, ValueError, "start (", start, ") + length (", length,
              ") exceeds dimension size (", size, ").");
  return slice(dim, start, start + length);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  dim = wrap_dim(dim, this->dim() + 1);
  IntList s = sizes(), st = strides();
  int64_t stride = dim < this->dim() ? detail::wrapping_mul(st[dim], s[dim]) : 1;  // as PyTorch, unchecked
  s.insert(s.begin() + dim, 1);
  st.insert(st.begin() + dim, stride);
  return recorded_view(Formula::Unsqueeze, *this, s, st, storage_offset(), detail::DimArgs{dim});
}

Tensor Tensor::squeeze(int64_t dim) const {
  dim = wrap_dim(dim, this->dim());
  IntList s = sizes(), st = strides();
  if (this->dim() > 0 && sizes()[dim] == 1) {
    s.erase(s.begin() + dim);
    st.erase(st.begin() + dim);
  }
  return recorded_view(Formula::Squeeze, *this, s, st, storage_offset(), detail::DimArgs{dim});
}

Tensor Tensor::expand(const IntList& shape) const {
  int64_t n = static_cast<int64_t>(shape.size());
  EMBER_CHECK(n >= dim(), ValueError, "expand: the number of sizes provided (", n,
              ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  IntList s(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t src = i - (n - dim());
    int64_t want = shape[i];
    if (src >= 0) {
      int64_t have = sizes()[src];
      if (want == -1) want = have;
      EMBER_CHECK(want >= 0, ValueError, "The expanded size of the tensor (", want, ") isn't allowed");
      EMBER_CHECK(have == want || have == 1, ValueError, "The expanded size of the tensor (", want,
                  ") must match the existing size (", have, ") at non-singleton dimension ", i,
                  ".  Target sizes: ", IntListPrinter{shape}, ".  Tensor sizes: ", IntListPrinter{sizes()});
      s[i] = want;
      st[i] = have == want ? strides()[src] : 0;
    } else {
      EMBER_CHECK(want >= 0, ValueError, "The expanded size of the tensor (", want,
                  ") isn't allowed in a leading, non-existing dimension ", i);
      s[i] = want;
      st[i] = 0;
    }
  }
  return recorded_view(Formula::Expand, *this, s, st, storage_offset());
}

}  // namespace ember
