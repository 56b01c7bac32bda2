// cumsum: one Cumsum launch (kernel_call.h); integral and bool inputs give int64, as PyTorch.
#include "ember/errors.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

namespace {

Tensor cumsum_impl(const Tensor& a, int64_t dim) {
  EMBER_CHECK(!is_complex(a.dtype()), TypeError, "\"cumsum\" not implemented for '",
              detail::scalar_type_name(a.dtype()), "'");
  Tensor x = a.dim() == 0 ? a.reshape({1}) : a;
  Tensor out = detail::empty_on(x.sizes(), is_integral(x.dtype(), true) ? kInt64 : x.dtype(), x.device());
  detail::KernelCall call{detail::OpKind::Cumsum, {detail::make_arg(out)}, {detail::make_arg(x)}};
  call.args = detail::kargs::Dim{dim};
  detail::launch(x.device(), call);
  return a.dim() == 0 ? out.reshape({}) : out;
}

}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim) {
  return detail::op_entry(
      {detail::AutocastOp::kCumsum},
      [&](const Tensor& a) {
        const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
        return detail::op_entry(
            {.formula = detail::Formula::Cumsum, .attrs = detail::DimArgs{d}},
            [d](const Tensor& a) { return cumsum_impl(a, d); }, a);
      },
      a);
}

Tensor Tensor::cumsum(int64_t dim) const { return ember::cumsum(*this, dim); }

}  // namespace ember
