// Reductions: sum, mean, max, min over all elements or one dim; allclose, equal.
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/op_name.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

using detail::KernelCall;
using detail::OpKind;

namespace {

DType reduction_dtype(OpKind op, DType in) {
  switch (op) {
    case OpKind::Sum: return is_integral(in, true) ? kInt64 : in;
    case OpKind::Mean:
      EMBER_CHECK(is_floating_point(in) || is_complex(in), TypeError,
                  "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
                  "dtype. Got: ",
                  detail::scalar_type_name(in));
      return in;
    case OpKind::All: return kBool;
    default:
      EMBER_CHECK(!is_complex(in), TypeError, detail::op_name(op), "(): does not support complex input");
      return in;
  }
}

// dim < 0 with all_dims: the whole tensor to a 0-dim result.
Tensor reduce(OpKind op, const Tensor& a, bool all_dims, int64_t dim, bool keepdim) {
  DType out_dtype = reduction_dtype(op, a.dtype());
  if (all_dims) {
    EMBER_CHECK(a.numel() > 0 || (op != OpKind::Max && op != OpKind::Min), ValueError, detail::op_name(op),
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
                "the 'dim' argument.");
    Tensor out = detail::empty_on({}, out_dtype, a.device());
    KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}, detail::kargs::Dim{-1}};
    detail::launch(a.device(), call);
    return out;
  }
  int64_t d = detail::wrap_dim(dim, a.dim());
  if (a.dim() == 0) return reduce(op, a, true, -1, false);
  EMBER_CHECK(a.size(d) > 0 || (op != OpKind::Max && op != OpKind::Min), IndexError, detail::op_name(op),
              "(): Expected reduction dim ", d, " to have non-zero size.");
  IntList kept = a.sizes();
  kept[d] = 1;
  Tensor out = detail::empty_on(kept, out_dtype, a.device());
  KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}, detail::kargs::Dim{d}};
  detail::launch(a.device(), call);
  return keepdim ? out : out.squeeze(d);
}

}  // namespace

namespace {
using ember::detail::Formula;
Tensor reduce_all(Formula f, OpKind op, const Tensor& a) {
  return ember::detail::op_entry(
      {.formula = f}, [op](const Tensor& a) { return reduce(op, a, true, -1, false); }, a);
}
Tensor reduce_dim(Formula f, OpKind op, const Tensor& a, int64_t dim, bool keepdim) {
  return ember::detail::op_entry(
      {.formula = f, .attrs = ember::detail::ReduceDimArgs{a.dim() == 0 ? 0 : detail::wrap_dim(dim, a.dim()), keepdim}},
      [&](const Tensor& a) { return reduce(op, a, false, dim, keepdim); }, a);
}
}  // namespace

Tensor sum(const Tensor& a) {
  return ember::detail::op_entry(
      {detail::AutocastOp::kSum}, [](const Tensor& a) { return reduce_all(Formula::Sum, OpKind::Sum, a); }, a);
}
Tensor sum(const Tensor& a, int64_t dim, bool keepdim) {
  return ember::detail::op_entry(
      {detail::AutocastOp::kSum},
      [&](const Tensor& a) { return reduce_dim(Formula::SumDim, OpKind::Sum, a, dim, keepdim); }, a);
}
Tensor mean(const Tensor& a) { return reduce_all(Formula::Mean, OpKind::Mean, a); }
Tensor mean(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_dim(Formula::MeanDim, OpKind::Mean, a, dim, keepdim);
}
Tensor max(const Tensor& a) { return reduce_all(Formula::MaxAll, OpKind::Max, a); }
Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_dim(Formula::MaxDim, OpKind::Max, a, dim, keepdim);
}
Tensor min(const Tensor& a) { return reduce_all(Formula::MinAll, OpKind::Min, a); }
Tensor min(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_dim(Formula::MinDim, OpKind::Min, a, dim, keepdim);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  detail::check_same_device(a, b);
  EMBER_CHECK(a.dtype() == b.dtype(), TypeError, "allclose(): expected both tensors to have the same dtype, but got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  IntList shape = detail::broadcast_shapes(a.sizes(), b.sizes());
  Tensor close = detail::empty_on(shape, kBool, a.device());
  KernelCall call{OpKind::IsClose,
                  {detail::make_arg(close)},
                  {detail::make_arg(a, shape), detail::make_arg(b, shape)},
                  detail::kargs::IsClose{atol, rtol, equal_nan}};
  detail::launch(a.device(), call);
  return reduce(OpKind::All, close, true, -1, false).item<bool>();
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_same_device(a, b);
  if (a.sizes() != b.sizes()) return false;
  return reduce(OpKind::All, eq(a, b), true, -1, false).item<bool>();
}

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return ember::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return ember::mean(*this, dim, keepdim); }
Tensor Tensor::max() const { return ember::max(*this); }
Tensor Tensor::max(int64_t dim, bool keepdim) const { return ember::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return ember::min(*this); }
Tensor Tensor::min(int64_t dim, bool keepdim) const { return ember::min(*this, dim, keepdim); }
bool Tensor::allclose(const Tensor& o, double rtol, double atol, bool equal_nan) const {
  return ember::allclose(*this, o, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& o) const { return ember::equal(*this, o); }

}  // namespace ember
