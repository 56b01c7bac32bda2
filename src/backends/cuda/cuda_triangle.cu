// Triangle (triu and tril) on the driver backend: one thread per row of every matrix,
// running triangle_row, the body the cpu runs on strided rows (Note [Line kernels] in
// kernels/line_bodies.h). Rows are numbered row-major (the loop shape is not reordered),
// so a row's index within its matrix is its number modulo the matrix's rows.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/line_bodies.h"

namespace ember::detail::driver {
namespace {

template <typename T>
__global__ void triangle_kernel(int64_t lines, int64_t rows, int64_t cols, int64_t diagonal, bool upper, char* out,
                                const char* in, int64_t out_col, int64_t in_col, OffsetCalc<2> calc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < lines; line += stride) {
    int64_t o[2];
    calc.get(line, o);
    triangle_row<T>(out + o[0], out_col, in + o[1], in_col, cols, line % rows, diagonal, upper);
  }
}

}  // namespace

void launch_triangle(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0);
  const size_t nd = in.sizes.size();
  const auto& args = call.arg<kargs::Triangle>();
  EMBER_CHECK(nd >= 2, ValueError, args.upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  const int64_t rows = in.sizes[nd - 2], cols = in.sizes[nd - 1];
  if (in.numel() == 0) return;
  TensorArg o = out, x = in;
  o.sizes = x.sizes = in.sizes;
  o.sizes[nd - 1] = x.sizes[nd - 1] = 1;
  LoopShape lines = make_loop_shape({&o, &x}, /*reorder=*/false);
  OffsetCalc<2> calc = make_offset_calc<2>(lines);
  const int64_t diagonal = clamp_diagonal(args.diagonal, rows, cols);
  dispatch_if<AnyType>(in.dtype, "triangle", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto bytes = static_cast<int64_t>(sizeof(T));
    triangle_kernel<T><<<grid_blocks(lines.numel), kThreads, 0, stream>>>(
        lines.numel, rows, cols, diagonal, args.upper, static_cast<char*>(out.data), static_cast<const char*>(in.data),
        out.strides[nd - 1] * bytes, in.strides[nd - 1] * bytes, calc);
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
