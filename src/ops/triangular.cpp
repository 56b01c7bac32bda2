// triu and tril over the last two dims, composed of existing launches: the mask
// (column - row >= diagonal, or <=) from two aranges, broadcast over the batch dims by where.
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/recording.h"

namespace ember {

namespace {

Tensor triangle(const Tensor& a, int64_t diagonal, bool upper) {
  EMBER_CHECK(a.dim() >= 2, ValueError, upper ? "triu" : "tril",
              ": input tensor must have at least 2 dimensions");
  const TensorOptions index_options = TensorOptions(kInt64).device(a.device());
  // column >= row + diagonal (triu) or <= (tril): one broadcast comparison over the matrix.
  Tensor bound = arange(diagonal, a.size(-2) + diagonal, 1, index_options).unsqueeze(1);
  Tensor columns = arange(a.size(-1), index_options);
  Tensor keep = upper ? columns.ge(bound) : columns.le(bound);
  return where(keep, a, a.dtype() == kBool ? Scalar(false) : Scalar(0));
}

}  // namespace

Tensor triu(const Tensor& a, int64_t diagonal) {
  return detail::recorded(detail::Formula::Triu, {&a}, [&] { return triangle(a, diagonal, true); },
                          detail::DiagonalArgs{diagonal});
}
Tensor tril(const Tensor& a, int64_t diagonal) {
  return detail::recorded(detail::Formula::Tril, {&a}, [&] { return triangle(a, diagonal, false); },
                          detail::DiagonalArgs{diagonal});
}

Tensor Tensor::triu(int64_t diagonal) const { return ember::triu(*this, diagonal); }
Tensor Tensor::tril(int64_t diagonal) const { return ember::tril(*this, diagonal); }

}  // namespace ember
