// softmax, log_softmax, argmax and argmin: ops along one dim with their own kernels.
#include "ember/errors.h"
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

Tensor softmax_op(OpKind op, const Tensor& a, int64_t dim) {
  const int64_t d = detail::wrap_dim(dim, a.dim());
  EMBER_CHECK(is_floating_point(a.dtype()), TypeError, "\"",
              op == OpKind::Softmax ? "softmax_lastdim_kernel_impl" : "log_softmax_lastdim_kernel_impl",
              "\" not implemented for '", detail::scalar_type_name(a.dtype()), "'");
  Tensor out = detail::empty_on(a.sizes(), a.dtype(), a.device());
  if (a.numel() == 0) return out;
  const int64_t along = a.dim() == 0 ? 0 : d;
  KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}, detail::kargs::Dim{along}};
  detail::launch(a.device(), call);
  if (ember::detail::should_record(a)) {
    ember::detail::DimArgs attrs{along};
    ember::detail::record(op == OpKind::Softmax ? ember::detail::Formula::Softmax : ember::detail::Formula::LogSoftmax,
                          {a}, out, std::move(attrs));
  }
  return out;
}

Tensor arg_reduce(OpKind op, const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  const char* name = detail::op_name(op);
  EMBER_CHECK(!is_complex(a.dtype()), TypeError, "\"", name, "_cpu\" not implemented for '",
              detail::scalar_type_name(a.dtype()), "'");
  if (!dim || a.dim() == 0) {
    if (dim) detail::wrap_dim(*dim, a.dim());
    EMBER_CHECK(a.numel() > 0, IndexError, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
    Tensor out = detail::empty_on({}, kInt64, a.device());
    KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}, detail::kargs::Dim{-1}};
    detail::launch(a.device(), call);
    if (keepdim) return out.reshape(IntList(static_cast<size_t>(a.dim()), 1));
    return out;
  }
  const int64_t d = detail::wrap_dim(*dim, a.dim());
  EMBER_CHECK(a.size(d) > 0, IndexError, name, "(): Expected reduction dim ", d, " to have non-zero size.");
  IntList kept = a.sizes();
  kept[d] = 1;
  Tensor out = detail::empty_on(kept, kInt64, a.device());
  if (out.numel() > 0) {
    KernelCall call{op, {detail::make_arg(out)}, {detail::make_arg(a)}, detail::kargs::Dim{d}};
    detail::launch(a.device(), call);
  }
  return keepdim ? out : out.squeeze(d);
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  return detail::op_entry(
      {detail::AutocastOp::kSoftmax}, [dim](const Tensor& a) { return softmax_op(OpKind::Softmax, a, dim); }, a);
}
Tensor log_softmax(const Tensor& a, int64_t dim) {
  return detail::op_entry(
      {detail::AutocastOp::kLogSoftmax}, [dim](const Tensor& a) { return softmax_op(OpKind::LogSoftmax, a, dim); }, a);
}
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(OpKind::ArgMax, a, dim, keepdim);
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(OpKind::ArgMin, a, dim, keepdim);
}

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return ember::argmin(*this, dim, keepdim); }

}  // namespace ember
