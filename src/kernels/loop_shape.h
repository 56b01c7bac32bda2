// LoopShape: the iteration space of an element-wise kernel after simplification.
//
// Operands share sizes (the op layer broadcast them; broadcast dims have stride 0).
// make_loop_shape drops size-1 dims, optionally reorders dims so the output's
// smallest stride is innermost (element-wise maps may visit elements in any order;
// random ops must not reorder, they number elements row-major), and coalesces
// adjacent dims that are contiguous for every operand. A contiguous tensor becomes
// a single dim, so executors reach their fast path with one test. Strides are in
// bytes so operands of different dtypes (Copy) share one shape. Backend-neutral.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/small_vector.h"
#include "kernels/kernel_call.h"

namespace ember::detail {

inline constexpr int kMaxLoopOperands = 4;

struct LoopShape {
  int num_operands = 0;
  // Inline up to kInlineDims: building a loop shape allocates nothing for common tensors.
  static constexpr size_t kInlineDims = 6;
  SmallVector<int64_t, kInlineDims> sizes;                                  // outermost first; at least one dim
  SmallVector<std::array<int64_t, kMaxLoopOperands>, kInlineDims> strides;  // [dim][operand], bytes
  int64_t numel = 0;

  int ndim() const noexcept { return static_cast<int>(sizes.size()); }
  /// True when the single remaining dim is dense for operand k of `bytes` per element.
  bool contiguous(int k, int64_t bytes) const noexcept { return ndim() == 1 && strides[0][k] == bytes; }
};

/// Builds the shape of `operands` (outputs first). All must have the sizes of operands[0].
/// `reorder`: allow permuting dims (forbidden when element order is observable).
LoopShape make_loop_shape(std::initializer_list<const TensorArg*> operands, bool reorder);
LoopShape make_loop_shape(const std::vector<const TensorArg*>& operands, bool reorder);
LoopShape make_loop_shape(const TensorArg* const* operands, size_t count, bool reorder);

/// `arg` without its dim `dim` (sizes and strides), as a loop over the other dims sees it:
/// the positions of a slice along `dim`. A 1-d `arg` becomes 0-d, one position; a `dim`
/// past the last leaves `arg` as it is.
TensorArg without_dim(const TensorArg& arg, size_t dim);

}  // namespace ember::detail
