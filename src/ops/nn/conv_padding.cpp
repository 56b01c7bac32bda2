// pad_spatial: zeros by concatenation, the other modes as one index_select per
// padded dim.
#include "ops/nn/conv_padding.h"

#include <vector>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ember/tensor_data.h"

namespace ember::detail::nn {
namespace {

// The source coordinate of padded coordinate t along a dim of `size` with
// `left` in front.
int64_t source_index(int64_t t, int64_t left, int64_t size, const std::string& mode) {
  const int64_t pos = t - left;
  if (mode == "replicate") return pos < 0 ? 0 : (pos >= size ? size - 1 : pos);
  if (mode == "circular") return ((pos % size) + size) % size;
  return pos < 0 ? -pos : (pos >= size ? 2 * (size - 1) - pos : pos);  // reflect
}

}  // namespace

Tensor pad_spatial(const Tensor& input, const IntList& pad, const std::string& mode) {
  const auto padded_dims = static_cast<int64_t>(pad.size() / 2);
  // Every check first, so that a refused pad leaves nothing half done.
  for (int64_t k = 0; k < padded_dims; ++k) {
    const int64_t dim = input.dim() - 1 - k, size = input.size(dim), left = pad[2 * k], right = pad[2 * k + 1];
    if (mode == "reflect") {
      EMBER_CHECK(left < size && right < size, ValueError, "Argument #", 4 + 2 * k,
                  ": Padding size should be less than the corresponding input "
                  "dimension, but got: padding (",
                  left, ", ", right, ") at dimension ", dim, " of input ", IntListPrinter{input.sizes()});
    } else if (mode == "circular") {
      EMBER_CHECK(left <= size && right <= size, ValueError, "Padding value causes wrapping around more than once.");
    }
    if (mode != "zeros") {
      EMBER_CHECK(size > 0, ValueError, mode, " padding: expected non-zero size at dimension ", dim, " of input ",
                  IntListPrinter{input.sizes()});
    }
  }
  Tensor out = input;
  for (int64_t k = 0; k < padded_dims; ++k) {
    const int64_t dim = input.dim() - 1 - k, size = input.size(dim), left = pad[2 * k], right = pad[2 * k + 1];
    if (left == 0 && right == 0) continue;
    if (mode == "zeros") {
      const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
      IntList sizes = out.sizes();
      std::vector<Tensor> parts;
      sizes[dim] = left;
      if (left > 0) parts.push_back(zeros(sizes, options));
      parts.push_back(out);
      sizes[dim] = right;
      if (right > 0) parts.push_back(zeros(sizes, options));
      out = cat(parts, dim);
      continue;
    }
    std::vector<int64_t> index(size + left + right);
    for (int64_t t = 0; t < static_cast<int64_t>(index.size()); ++t) index[t] = source_index(t, left, size, mode);
    out = out.index_select(dim, tensor(TensorData(index)).to(input.device()));
  }
  return out;
}

}  // namespace ember::detail::nn
