// index_add_ and index_add: one IndexAdd launch (contract in kernels/transformer_kernels.h),
// deterministic on every backend. The node keeps only the index: self's gradient is the
// output's, source's is the output's gradient at the indexed slices (times alpha).

#include "ember/errors.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "ops/overlap.h"

namespace ember {
namespace {

// Checks the arguments as PyTorch's index_add_ does; returns the wrapped dim.
int64_t check_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  EMBER_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, TypeError,
              "index_add_(): Expected dtype int32/int64 for index but got: ", detail::scalar_type_name(index.dtype()));
  EMBER_CHECK(
      index.dim() <= 1, IndexError, "index_add_(): Index is supposed to be a vector, but got dim: ", index.dim(),
      " with type: ", detail::scalar_type_name(index.dtype()), " and size: ", detail::IntListPrinter{index.sizes()});
  EMBER_CHECK(self.dtype() == source.dtype(), TypeError, "index_add_(): self (", detail::scalar_type_name(self.dtype()),
              ") and source (", detail::scalar_type_name(source.dtype()), ") must have the same scalar type");
  detail::check_same_device(self, index);
  detail::check_same_device(self, source);
  const int64_t source_size = source.dim() == 0 ? 1 : source.size(d < source.dim() ? d : 0);
  EMBER_CHECK(index.numel() == source_size, ValueError, "index_add_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim): (", source_size, "), for dim: ", d);
  bool same = self.dim() == source.dim() || (self.dim() <= 1 && source.dim() <= 1);
  for (int64_t i = 0; same && i < self.dim() && i < source.dim(); ++i) same = i == d || self.size(i) == source.size(i);
  EMBER_CHECK(same, ValueError,
              "source tensor shape must match self tensor shape, excluding the specified "
              "dimension. Got self.shape = ",
              detail::IntListPrinter{self.sizes()}, " source.shape = ", detail::IntListPrinter{source.sizes()});
  EMBER_CHECK(self.dtype() != kBool, TypeError, "\"index_add_cpu_\" not implemented for 'Bool'");
  return d;
}

void launch_index_add(const Tensor& self, int64_t d, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  if (self.numel() == 0 || index.numel() == 0) return;
  // 0-d and 1-element operands as {1}, so the kernel sees matching ranks.
  Tensor s = self.dim() == 0 ? self.view({1}) : self;
  Tensor src = source.dim() != s.dim() ? source.reshape(IntList{1}) : source;
  detail::KernelCall call{detail::OpKind::IndexAdd,
                          {detail::make_arg(s)},
                          {detail::make_arg(s), detail::make_arg(index), detail::make_arg(src)}};
  call.args = detail::kargs::IndexAdd{d, alpha};
  detail::launch(self.device(), call);
}

}  // namespace

Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const int64_t d = check_index_add(*this, dim, index, source);
  // As PyTorch: self is written while source and index are read (also by other threads).
  detail::check_no_internal_overlap(*this);
  detail::check_no_overlap(*this, index);
  detail::check_no_overlap(*this, source);
  return detail::op_entry_inplace(
      detail::Formula::IndexAdd, *this, source, [&] { launch_index_add(*this, d, index, source, alpha); },
      detail::IndexAddArgs{d, index, alpha});
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const int64_t d = check_index_add(self, dim, index, source);
  auto compute = [&](const Tensor& self, const Tensor& source) {
    Tensor out = self.clone();
    launch_index_add(out, d, index, source, alpha);
    return out;
  };
  return detail::op_entry({.formula = detail::Formula::IndexAdd, .attrs = detail::IndexAddArgs{d, index, alpha}},
                          compute, self, source);
}

Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return ember::index_add(*this, dim, index, source, alpha);
}

}  // namespace ember
