// The cpu executor's walk over the lines of a dim (Note [Line kernels] in kernels/line_bodies.h).
#pragma once

#include <algorithm>
#include <array>

#include "backends/cpu/cpu_loops.h"
#include "kernels/loop_shape.h"

namespace ember::detail::cpu {

/// Calls body(bases) once per line of `operands` along `dim`, with bases[k] the address of
/// operand k's element 0 of that line; `sizes` are the shape the lines range over (dim
/// included, any size: it is set to 1). Operands keep their own strides. Lines run on
/// several threads when `line_cost` (elements a line touches) times their number is large.
template <size_t N, typename Body>
void for_each_line(std::array<TensorArg, N> operands, const DimList& sizes, int64_t dim, int64_t line_cost, Body body) {
  std::array<const TensorArg*, N> pointers{};
  std::array<char*, N> base{};
  for (size_t k = 0; k < N; ++k) {
    operands[k].sizes = sizes;
    operands[k].sizes[static_cast<size_t>(dim)] = 1;
    pointers[k] = &operands[k];
    base[k] = static_cast<char*>(operands[k].data);
  }
  LoopShape shape = make_loop_shape(pointers.data(), N, /*reorder=*/true);
  if (shape.numel == 0) return;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, line_cost));
  parallel_loop(
      shape, base.data(),
      [&](char* const* p, const int64_t* st, int64_t n) {
        std::array<char*, N> line{};
        for (int64_t i = 0; i < n; ++i) {
          for (size_t k = 0; k < N; ++k) line[k] = p[k] + i * st[k];
          body(line);
        }
      },
      grain);
}

/// IndexError "index 7 is out of bounds for dimension 0 with size 5" (PyTorch's words) for
/// the first int64 entry of `index` outside [0, size).
void check_index_bounds(const TensorArg& index, int64_t dim, int64_t size);

}  // namespace ember::detail::cpu
