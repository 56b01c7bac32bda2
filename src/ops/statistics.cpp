// sum, mean, logsumexp, var and std over a list of dims; each records one node with its own
// backward (formulas_indexing.cpp).
//
// sum and mean are one Sum or Mean launch over every listed dim at once (kargs::Dim::more), so a
// float16 or bfloat16 result is rounded once, as PyTorch's; summing dim by dim would round each
// partial result (a convolution's bias gradient, autograd's sums over broadcast dims, var).
// logsumexp is one LogSumExp launch; the kernel subtracts the maximum first (an infinite
// maximum counts as 0, so all -inf gives -inf and +inf gives +inf, as PyTorch), so it
// neither overflows nor underflows. var and std are composed of existing launches.
// var takes two passes: the mean, then the sum of squared deviations from it, divided by
// max(N - correction, 0) (N the number of elements reduced; 0 gives inf or NaN as PyTorch).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

namespace {

// The dims wrapped, sorted and unique; empty means every dim.
IntList reduced_dims(const Tensor& a, const IntList& dims) {
  IntList out;
  if (dims.empty()) {
    for (int64_t d = 0; d < a.dim(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t w = detail::wrap_dim(d, std::max<int64_t>(a.dim(), 1));
    EMBER_CHECK(std::find(out.begin(), out.end(), w) == out.end(), ValueError, "dim ", w,
                " appears multiple times in the list of dims");
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  if (a.dim() == 0) out.clear();  // a 0-dim tensor reduces over nothing
  return out;
}

Tensor squeeze_dims(Tensor x, const IntList& dims) {
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) x = x.squeeze(*it);
  return x;
}

// PyTorch's limit for a given list of reduced dims (a 64-bit mask); kargs::Dim::more has the same.
// An empty list (every dim) is the whole-tensor launch and has none.
void check_dim_mask(const Tensor& a, const IntList& dims) {
  EMBER_CHECK(dims.empty() || a.dim() <= 64, ValueError, "only tensors with up to 64 dims are supported");
}

// One Sum or Mean launch over `dims` (wrapped, sorted, unique), the result in `out_dtype`, in
// keepdim form. Every dim reduced is the whole-tensor launch (its grid-wide passes).
Tensor reduce_dims_keepdim(detail::OpKind op, const Tensor& a, const IntList& dims, DType out_dtype) {
  IntList kept = a.sizes();
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  const bool all = static_cast<int64_t>(dims.size()) == a.dim();
  EMBER_ASSERT(all || a.dim() <= 64);  // the entry points' check_dim_mask
  Tensor out = detail::empty_on(all ? IntList{} : kept, out_dtype, a.device());
  detail::kargs::Dim arg{all ? -1 : dims[0]};
  if (!all) {
    for (size_t i = 1; i < dims.size(); ++i) arg.more |= uint64_t{1} << dims[i];
  }
  detail::KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}};
  call.args = arg;
  detail::launch(a.device(), call);
  return all ? out.reshape(kept) : out;
}

// True when the kernel may read `in` as is for a result in `out`, so dtype= costs no cast: it adds
// in what casting first would (float16 and bfloat16 in float lanes for a float32 result, integers
// in int64). A float64 result from narrower floats casts first: the kernel's lanes for those are
// float, and PyTorch's sum of the cast input is a double one.
bool reads_as(DType in, DType out, bool sum) {
  if (in == out) return true;
  if (in == kFloat16 || in == kBFloat16) return out == kFloat32;
  return sum && is_integral(in, true) && out == kInt64;
}

// sum or mean over `dims` (as given), in `dtype` or the op's own result dtype.
Tensor sum_or_mean(detail::OpKind op, const Tensor& a, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  const bool sum = op == detail::OpKind::Sum;
  const DType own = sum && is_integral(a.dtype(), true) ? kInt64 : a.dtype();
  const DType out_dtype = dtype.value_or(own);
  if (!sum) {
    EMBER_CHECK(is_floating_point(out_dtype) || is_complex(out_dtype), TypeError,
                "mean(): could not infer output dtype. ", dtype ? "Optional" : "Input",
                " dtype must be either a floating point or complex dtype. Got: ", detail::scalar_type_name(out_dtype));
  }
  IntList ds = reduced_dims(a, dims);
  const detail::Formula formula = sum ? detail::Formula::SumDims : detail::Formula::MeanDims;
  return detail::op_entry(
      {.formula = formula, .attrs = detail::ReduceDimsArgs{ds, keepdim}},
      [&](const Tensor& a) {
        const Tensor in = reads_as(a.dtype(), out_dtype, sum) ? a : a.to(out_dtype);
        Tensor out = reduce_dims_keepdim(op, in, ds, out_dtype);
        return keepdim ? out : squeeze_dims(out, ds);
      },
      a);
}

// The keepdim sum of x over dims (var's passes): not through sum's precision row, as var has
// none (under autocast a float16 var stays float16, as PyTorch's).
Tensor sum_dims(const Tensor& x, const IntList& dims) {
  return sum_or_mean(detail::OpKind::Sum, x, dims, /*keepdim=*/true, std::nullopt);
}

int64_t reduced_count(const Tensor& a, const IntList& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= a.size(d);
  return n;
}

// One LogSumExp launch (kernel_call.h, Note [Fused logsumexp] in cpu_softmax.cpp) along
// the last dim of x permuted to (kept dims, reduced dims) and flattened there; a single
// reduced dim needs neither. The result has the keepdim shape.
Tensor logsumexp_keepdim(const Tensor& x, const IntList& dims) {
  IntList kept = x.sizes();
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  Tensor in = x;
  int64_t dim = dims.empty() ? 0 : dims[0];  // a 0-dim tensor is one line of one element
  if (dims.size() > 1) {
    IntList order, flat;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d), flat.push_back(x.size(d));
    }
    order.insert(order.end(), dims.begin(), dims.end());
    flat.push_back(reduced_count(x, dims));
    in = x.permute(order).reshape(flat);
    dim = static_cast<int64_t>(flat.size()) - 1;
  }
  IntList out_sizes = in.sizes();
  if (in.dim() > 0) out_sizes[static_cast<size_t>(dim)] = 1;
  Tensor out = detail::empty_on(out_sizes, in.dtype(), in.device());
  detail::KernelCall call{detail::OpKind::LogSumExp, {detail::make_arg(out)}, {detail::make_arg(in)}};
  call.args = detail::kargs::Dim{dim};
  detail::launch(in.device(), call);
  return dims.size() > 1 ? out.reshape(kept) : out;
}

Tensor logsumexp_impl(const Tensor& a, const IntList& dims, bool keepdim) {
  EMBER_CHECK(
      !is_complex(a.dtype()), TypeError,
      "logsumexp(): Expected floating point type for result tensor, but got: ", detail::scalar_type_name(a.dtype()));
  Tensor out = logsumexp_keepdim(is_integral(a.dtype(), true) ? a.to(default_dtype()) : a, dims);
  return keepdim ? out : squeeze_dims(out, dims);
}

Tensor var_impl(const Tensor& a, const IntList& dims, int64_t correction, bool keepdim) {
  EMBER_CHECK(is_floating_point(a.dtype()), TypeError,
              "std and var only support floating point dtypes (complex inputs are not supported), got ",
              detail::scalar_type_name(a.dtype()));
  const auto n = static_cast<double>(reduced_count(a, dims));
  Tensor deviation = a - sum_dims(a, dims) / n;
  Tensor out = sum_dims(deviation * deviation, dims) / std::max(n - static_cast<double>(correction), 0.0);
  return keepdim ? out : squeeze_dims(out, dims);
}

}  // namespace

Tensor sum(const Tensor& a, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  check_dim_mask(a, dims);
  // Without dtype= the precision row applies (fp32_set_opt_dtype under autocast); with it the
  // caller chose the result's dtype, which autocast leaves alone, as PyTorch's policy does.
  if (dtype) return sum_or_mean(detail::OpKind::Sum, a, dims, keepdim, dtype);
  return detail::op_entry(
      {detail::AutocastOp::kSum},
      [&](const Tensor& a) { return sum_or_mean(detail::OpKind::Sum, a, dims, keepdim, std::nullopt); }, a);
}

Tensor mean(const Tensor& a, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  check_dim_mask(a, dims);
  return sum_or_mean(detail::OpKind::Mean, a, dims, keepdim, dtype);
}

Tensor logsumexp(const Tensor& a, const IntList& dims, bool keepdim) {
  return detail::op_entry(
      {detail::AutocastOp::kLogSumExp},
      [&](const Tensor& a) {
        IntList ds = reduced_dims(a, dims);
        return detail::op_entry(
            {.formula = detail::Formula::Logsumexp, .attrs = detail::ReduceDimsArgs{ds, keepdim}},
            [&](const Tensor& a) { return logsumexp_impl(a, ds, keepdim); }, a);
      },
      a);
}

Tensor var(const Tensor& a, const IntList& dims, int64_t correction, bool keepdim) {
  check_dim_mask(a, dims);
  IntList ds = reduced_dims(a, dims);
  return detail::op_entry(
      {.formula = detail::Formula::Var, .attrs = detail::VarArgs{ds, correction, keepdim}},
      [&](const Tensor& a) { return var_impl(a, ds, correction, keepdim); }, a);
}

Tensor std(const Tensor& a, const IntList& dims, int64_t correction, bool keepdim) {
  check_dim_mask(a, dims);
  IntList ds = reduced_dims(a, dims);
  return detail::op_entry(
      {.formula = detail::Formula::Std, .attrs = detail::VarArgs{ds, correction, keepdim}},
      [&](const Tensor& a) { return var_impl(a, ds, correction, keepdim).sqrt(); }, a);
}

Tensor Tensor::logsumexp(const IntList& dims, bool keepdim) const { return ember::logsumexp(*this, dims, keepdim); }
Tensor Tensor::sum(const IntList& dims, bool keepdim, std::optional<DType> dtype) const {
  return ember::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean(const IntList& dims, bool keepdim, std::optional<DType> dtype) const {
  return ember::mean(*this, dims, keepdim, dtype);
}
Tensor Tensor::var(const IntList& dims, int64_t correction, bool keepdim) const {
  return ember::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const IntList& dims, int64_t correction, bool keepdim) const {
  return ember::std(*this, dims, correction, keepdim);
}

}  // namespace ember
