// tensordot: permute a's free dims first and b's last, fold each side to a matrix, one
// matmul (so TF32 follows backends::cuda::matmul.allow_tf32 on cuda devices, as PyTorch's
// at::mm does), unfold. Composed of recorded ops: autograd differentiates through them.
#include <algorithm>
#include <vector>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/linalg_distance.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

namespace {

// Which of t's dims `dims` names (PyTorch's dim_list_to_bitset: each at most once).
std::vector<bool> contracted_mask(const IntList& dims, int64_t ndim) {
  std::vector<bool> mask(static_cast<size_t>(ndim), false);
  for (int64_t d : dims) {
    const int64_t w = detail::wrap_dim(d, ndim);
    EMBER_CHECK(!mask[w], ValueError, "dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

Tensor tensordot_impl(const Tensor& a, const Tensor& b, const IntList& dims_a, const IntList& dims_b) {
  EMBER_CHECK(dims_a.size() == dims_b.size(), ValueError, "both dimension lists should have same length");
  EMBER_CHECK(a.dtype() == b.dtype(), TypeError, "both inputs should have same dtype");
  detail::check_same_device(a, b);
  // A contracted pair with a size-1 side broadcasts: the other side's dim is summed away
  // first (keeping it, size 1), so it adds nothing to the contracted size.
  Tensor ta = a, tb = b;
  int64_t contracted = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    const int64_t da = detail::wrap_dim(dims_a[i], a.dim()), db = detail::wrap_dim(dims_b[i], b.dim());
    const int64_t sa = a.size(da), sb = b.size(db);
    if (sb == 1) {
      ta = ta.sum(da, true);
    } else if (sa == 1) {
      tb = tb.sum(db, true);
    } else {
      EMBER_CHECK(sa == sb, ValueError, "contracted dimensions need to match, but first has size ", sa, " in dim ",
                  dims_a[i], " and second has size ", sb, " in dim ", dims_b[i]);
      contracted *= sa;
    }
  }
  const std::vector<bool> in_a = contracted_mask(dims_a, a.dim()), in_b = contracted_mask(dims_b, b.dim());
  IntList perm_a, perm_b, out_shape;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (in_a[d]) continue;
    perm_a.push_back(d);
    rows *= ta.size(d);
    out_shape.push_back(ta.size(d));
  }
  for (int64_t d : dims_a) perm_a.push_back(detail::wrap_dim(d, a.dim()));
  for (int64_t d : dims_b) perm_b.push_back(detail::wrap_dim(d, b.dim()));
  for (int64_t d = 0; d < b.dim(); ++d) {
    if (in_b[d]) continue;
    perm_b.push_back(d);
    cols *= tb.size(d);
    out_shape.push_back(tb.size(d));
  }
  Tensor lhs = ta.permute(perm_a).reshape({rows, contracted});
  Tensor rhs = tb.permute(perm_b).reshape({contracted, cols});
  return matmul(lhs, rhs).reshape(out_shape);
}

}  // namespace

Tensor tensordot(const Tensor& a, const Tensor& b, const IntList& dims_a, const IntList& dims_b) {
  return detail::op_entry(
      {detail::AutocastOp::kTensordot},
      [&](const Tensor& a, const Tensor& b) { return tensordot_impl(a, b, dims_a, dims_b); }, a, b);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  return detail::op_entry(
      {detail::AutocastOp::kTensordot},
      [dims](const Tensor& a, const Tensor& b) {
        EMBER_CHECK(dims >= 0, ValueError, "tensordot expects dims >= 0, but got dims=", dims);
        EMBER_CHECK(dims <= std::min(a.dim(), b.dim()), ValueError,
                    "tensordot expects dims < ndim_a or ndim_b, but got dims=", dims);
        IntList dims_a, dims_b;
        for (int64_t i = 0; i < dims; ++i) {
          dims_a.push_back(i - dims);
          dims_b.push_back(i);
        }
        return tensordot(a, b, dims_a, dims_b);
      },
      a, b);
}

}  // namespace ember
