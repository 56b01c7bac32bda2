// embedding: the rows of weight that the indices name, as one index_select over the
// flattened indices (so an index out of range is index_select's error: IndexError on the
// cpu, a device-side assert on cuda devices). The backward is an index_add into zeros of
// weight's shape (deterministic: ops/index_add.cpp), with padding_idx's row left zero.
#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/op_entry.h"

namespace ember::nn::functional {

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  EMBER_CHECK(input.dtype() == kInt64 || input.dtype() == kInt32, TypeError,
              "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
              "but got torch.",
              input.is_cuda() ? "cuda." : "", detail::scalar_type_name(input.dtype()),
              "Tensor instead (while checking arguments for embedding)");
  EMBER_CHECK(weight.dim() == 2, ValueError, "'weight' must be 2-D");
  const int64_t rows = weight.size(0);
  if (padding_idx) {
    EMBER_CHECK(*padding_idx < rows && *padding_idx >= -rows, ValueError, "Padding_idx must be within num_embeddings");
    if (*padding_idx < 0) *padding_idx += rows;
  }
  auto compute = [&](const Tensor& weight) {
    IntList shape = input.sizes();
    shape.push_back(weight.size(1));
    return weight.index_select(0, input.reshape({-1})).view(shape);
  };
  return detail::op_entry({.formula = detail::Formula::Embedding, .attrs = detail::EmbeddingArgs{input, padding_idx}},
                          compute, weight);
}

}  // namespace ember::nn::functional
