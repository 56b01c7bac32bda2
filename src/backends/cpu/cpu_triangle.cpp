// Triangle (triu and tril) on the host: one pass over each matrix of the last two dims,
// row by row. Dense rows copy the kept columns and zero the rest with memcpy and memset
// (every dtype's zero is all-zero bytes); other rows run triangle_row, the body the driver
// runs (Note [Line kernels] in kernels/line_bodies.h).
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/line_bodies.h"

namespace ember::detail::cpu {
namespace {

struct MatrixWalk {
  int64_t rows, cols, diagonal;
  bool upper;
  int64_t out_row, out_col, in_row, in_col;  // byte strides
};

template <typename T>
void triangle_matrix(char* out, const char* in, const MatrixWalk& w) {
  const bool dense = w.out_col == sizeof(T) && w.in_col == sizeof(T);
  for (int64_t r = 0; r < w.rows; ++r) {
    char* o = out + r * w.out_row;
    const char* x = in + r * w.in_row;
    if (!dense) {
      triangle_row<T>(o, w.out_col, x, w.in_col, w.cols, r, w.diagonal, w.upper);
      continue;
    }
    int64_t first = 0, last = 0;
    triangle_columns(r, w.diagonal, w.cols, w.upper, &first, &last);
    const auto bytes = static_cast<int64_t>(sizeof(T));
    std::memset(o, 0, static_cast<size_t>(first * bytes));
    std::memcpy(o + first * bytes, x + first * bytes, static_cast<size_t>((last - first) * bytes));
    std::memset(o + last * bytes, 0, static_cast<size_t>((w.cols - last) * bytes));
  }
}

}  // namespace

void run_triangle(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError,
              "triangle: expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  expect_dtype("triangle", out, in.dtype);
  const size_t nd = in.sizes.size();
  const auto& args = call.arg<kargs::Triangle>();
  EMBER_CHECK(nd >= 2, ValueError, args.upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  const int64_t rows = in.sizes[nd - 2], cols = in.sizes[nd - 1];
  TensorArg o = out, x = in;  // the matrices: the batch dims alone
  o.sizes = x.sizes = in.sizes;
  o.sizes[nd - 1] = o.sizes[nd - 2] = x.sizes[nd - 1] = x.sizes[nd - 2] = 1;
  LoopShape s = make_loop_shape({&o, &x}, /*reorder=*/true);
  if (s.numel == 0 || rows == 0 || cols == 0) return;
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  const int64_t grain = std::max<int64_t>(1, kGrainSize / (rows * cols));
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    const auto bytes = static_cast<int64_t>(sizeof(T));
    const MatrixWalk w{rows,
                       cols,
                       clamp_diagonal(args.diagonal, rows, cols),
                       args.upper,
                       out.strides[nd - 2] * bytes,
                       out.strides[nd - 1] * bytes,
                       in.strides[nd - 2] * bytes,
                       in.strides[nd - 1] * bytes};
    parallel_loop(
        s, base,
        [&w](char* const* p, const int64_t* st, int64_t count) {
          for (int64_t i = 0; i < count; ++i) triangle_matrix<T>(p[0] + i * st[0], p[1] + i * st[1], w);
        },
        grain);
  });
}

}  // namespace ember::detail::cpu
