#include "kernels/loop_shape.h"

#include <utility>

#include "kernels/dtype_dispatch.h"

namespace ember::detail {
namespace {

// True when dim `a` should be iterated inside dim `b`: the first operand whose strides
// differ (ignoring broadcast zeros) decides, outputs first; ties keep the given order.
bool should_be_inner(const LoopShape& s, size_t a, size_t b) {
  for (int k = 0; k < s.num_operands; ++k) {
    int64_t sa = s.strides[a][k], sb = s.strides[b][k];
    if (sa == 0 || sb == 0 || sa == sb) continue;
    return sa < sb;
  }
  return false;
}

}  // namespace

LoopShape make_loop_shape(std::initializer_list<const TensorArg*> operands, bool reorder) {
  return make_loop_shape(operands.begin(), operands.size(), reorder);
}

LoopShape make_loop_shape(const std::vector<const TensorArg*>& operands, bool reorder) {
  return make_loop_shape(operands.data(), operands.size(), reorder);
}

LoopShape make_loop_shape(const TensorArg* const* operands, size_t count, bool reorder) {
  EMBER_ASSERT(count > 0 && count <= static_cast<size_t>(kMaxLoopOperands));
  LoopShape s;
  s.num_operands = static_cast<int>(count);
  const auto& sizes = operands[0]->sizes;
  s.numel = operands[0]->numel();
  bool dense = s.numel > 0;
  for (size_t k = 0; k < count; ++k) {
    EMBER_ASSERT(operands[k]->sizes == sizes && operands[k]->strides.size() == sizes.size());
    int64_t expected = 1;
    for (size_t d = sizes.size(); d-- > 0 && dense;) {
      dense = sizes[d] == 1 || operands[k]->strides[d] == expected;
      expected *= sizes[d];
    }
  }
  if (dense) {
    // Every operand row-major and dense (the common case): what the general path below
    // would coalesce to, one dim, without sorting.
    s.sizes.assign(1, s.numel);
    s.strides.resize(1);
    for (size_t k = 0; k < count; ++k) s.strides[0][k] = static_cast<int64_t>(itemsize(operands[k]->dtype));
    return s;
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;  // any stride: it is never stepped
    std::array<int64_t, kMaxLoopOperands> st{};
    for (int k = 0; k < s.num_operands; ++k) {
      st[k] = operands[k]->strides[d] * static_cast<int64_t>(itemsize(operands[k]->dtype));
    }
    s.sizes.push_back(sizes[d]);
    s.strides.push_back(st);
  }
  if (reorder) {
    // Insertion sort, stable: move inner-looking dims towards the end.
    for (size_t i = 1; i < s.sizes.size(); ++i) {
      for (size_t j = i; j > 0 && should_be_inner(s, j - 1, j); --j) {
        std::swap(s.sizes[j - 1], s.sizes[j]);
        std::swap(s.strides[j - 1], s.strides[j]);
      }
    }
  }
  // Coalesce: outer dim o and inner dim i merge when stride[o] == stride[i] * size[i]
  // for every operand.
  size_t out = 0;
  for (size_t d = 1; d < s.sizes.size(); ++d) {
    bool mergeable = true;
    for (int k = 0; k < s.num_operands; ++k) {
      mergeable = mergeable && s.strides[out][k] == s.strides[d][k] * s.sizes[d];
    }
    if (mergeable) {
      s.sizes[out] *= s.sizes[d];
      s.strides[out] = s.strides[d];
    } else {
      ++out;
      s.sizes[out] = s.sizes[d];
      s.strides[out] = s.strides[d];
    }
  }
  if (s.sizes.empty() || s.numel == 0) {
    // A scalar (or all dims of size 1) is one dense element; an empty tensor has none.
    s.sizes.assign(1, s.numel == 0 ? 0 : 1);
    s.strides.resize(1);
    for (int k = 0; k < s.num_operands; ++k) {
      s.strides[0][k] = static_cast<int64_t>(itemsize(operands[k]->dtype));
    }
  } else {
    s.sizes.resize(out + 1);
    s.strides.resize(out + 1);
  }
  return s;
}

TensorArg without_dim(const TensorArg& arg, size_t dim) {
  TensorArg view = arg;
  if (dim >= arg.sizes.size()) return view;
  view.sizes.clear();
  view.strides.clear();
  for (size_t d = 0; d < arg.sizes.size(); ++d) {
    if (d == dim) continue;
    view.sizes.push_back(arg.sizes[d]);
    view.strides.push_back(arg.strides[d]);
  }
  return view;
}

}  // namespace ember::detail
