// triu and tril over the last two dims: one Triangle launch (kernel_call.h) copies each
// matrix's kept columns row by row and zeroes the rest, over any batch dims and strides.
#include "ember/errors.h"
#include "ember/ops.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

namespace {

Tensor triangle(const Tensor& a, int64_t diagonal, bool upper) {
  EMBER_CHECK(a.dim() >= 2, ValueError, upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  Tensor out = detail::empty_on(a.sizes(), a.dtype(), a.device());
  detail::KernelCall call{detail::OpKind::Triangle, {detail::make_arg(out)}, {detail::make_arg(a)}};
  call.args = detail::kargs::Triangle{diagonal, upper};
  detail::launch(a.device(), call);
  return out;
}

}  // namespace

Tensor triu(const Tensor& a, int64_t diagonal) {
  return detail::op_entry(
      {.formula = detail::Formula::Triu, .attrs = detail::DiagonalArgs{diagonal}},
      [diagonal](const Tensor& a) { return triangle(a, diagonal, true); }, a);
}
Tensor tril(const Tensor& a, int64_t diagonal) {
  return detail::op_entry(
      {.formula = detail::Formula::Tril, .attrs = detail::DiagonalArgs{diagonal}},
      [diagonal](const Tensor& a) { return triangle(a, diagonal, false); }, a);
}

Tensor Tensor::triu(int64_t diagonal) const { return ember::triu(*this, diagonal); }
Tensor Tensor::tril(int64_t diagonal) const { return ember::tril(*this, diagonal); }

}  // namespace ember
