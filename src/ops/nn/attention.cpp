// scaled_dot_product_attention: PyTorch's math path, composed of differentiable ops
// (memory O(L * S) per head): q @ k^T * scale, the causal or given mask, softmax over the
// keys, dropout with the default generator, then @ v.
#include <cmath>
#include <limits>

#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/nn/functional.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember::nn::functional {
namespace {

// Whether `from` broadcasts to `to` (numpy rules, `to` unchanged).
bool broadcasts_to(const IntList& from, const IntList& to) {
  if (from.size() > to.size()) return false;
  const size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[offset + i]) return false;
  }
  return true;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  auto compute = [&](const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask) {
    EMBER_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, ValueError,
                "scaled_dot_product_attention: expected query, key and value of at least 2 dims, but got ", query.dim(),
                ", ", key.dim(), " and ", value.dim());
    EMBER_CHECK(
        query.dtype() == key.dtype() && query.dtype() == value.dtype(), TypeError,
        "Expected query, key, and value to have the same dtype, but got query.dtype: ", dtype_name(query.dtype()),
        " key.dtype: ", dtype_name(key.dtype()), " and value.dtype: ", dtype_name(value.dtype()), " instead.");
    EMBER_CHECK(is_floating_point(query.dtype()), TypeError,
                "scaled_dot_product_attention: expected floating point query, key and value, but got ",
                dtype_name(query.dtype()));
    detail::check_same_device(query, key);
    detail::check_same_device(query, value);
    EMBER_CHECK(query.size(-1) == key.size(-1), ValueError,
                "scaled_dot_product_attention: query and key must have the same embedding dim, but got "
                "query.size(-1) = ",
                query.size(-1), " and key.size(-1) = ", key.size(-1));
    EMBER_CHECK(key.size(-2) == value.size(-2), ValueError,
                "scaled_dot_product_attention: key and value must have the same sequence length, but got "
                "key.size(-2) = ",
                key.size(-2), " and value.size(-2) = ", value.size(-2));
    EMBER_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError,
                "dropout probability has to be between 0 and 1, but got ", dropout_p);
    EMBER_CHECK(!(is_causal && attn_mask.defined()), ValueError,
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    const int64_t L = query.size(-2), S = key.size(-2);
    if (attn_mask.defined()) {
      EMBER_CHECK(attn_mask.dtype() == kBool || attn_mask.dtype() == query.dtype(), TypeError,
                  "Expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: ",
                  dtype_name(attn_mask.dtype()), " and query.dtype: ", dtype_name(query.dtype()), " instead.");
      detail::check_same_device(query, attn_mask);
      IntList batch = detail::broadcast_shapes(IntList(query.sizes().begin(), query.sizes().end() - 2),
                                               IntList(key.sizes().begin(), key.sizes().end() - 2));
      IntList weights = batch;
      weights.push_back(L);
      weights.push_back(S);
      EMBER_CHECK(broadcasts_to(attn_mask.sizes(), weights), ValueError,
                  "scaled_dot_product_attention: attn_mask of "
                  "shape ",
                  ember::detail::IntListPrinter{attn_mask.sizes()},
                  " does not broadcast to the attention weights' shape ", ember::detail::IntListPrinter{weights});
    }
    const double factor = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
    Tensor weights = matmul(query, key.transpose(-2, -1)) * factor;
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    if (is_causal) {
      // Lower triangular over [L, S]: query i attends to keys j <= i.
      TensorOptions positions = TensorOptions(kInt64).device(query.device());
      Tensor keep = arange(L, positions).unsqueeze(1).ge(arange(S, positions).unsqueeze(0));
      weights = where(keep, weights, kNegInf);
    } else if (attn_mask.defined()) {
      // A bool mask becomes an additive one (-inf where false), as PyTorch's
      // convert_boolean_attn_mask: a query row masked whole is NaN in the forward and, through
      // the addition, in its gradient too (where() would send that row a zero gradient).
      const Tensor zero = zeros({}, TensorOptions(query.device()).dtype(query.dtype()));
      weights = weights + (attn_mask.dtype() == kBool ? where(attn_mask, zero, kNegInf) : attn_mask);
    }
    weights = softmax(weights, -1);
    if (dropout_p > 0.0) weights = dropout(weights, dropout_p, /*training=*/true);
    return matmul(weights, value);
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kAttention}, compute, query, key, value, attn_mask);
}

}  // namespace ember::nn::functional
