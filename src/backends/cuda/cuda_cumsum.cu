// Cumsum and Multinomial on the driver backend: one thread per line (per row of weights),
// running the bodies the cpu runs (Note [Line kernels] in kernels/line_bodies.h), so both
// give the same bits: cumsum's serial sums, multinomial's Philox draws.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/line_bodies.h"

namespace ember::detail::driver {
namespace {

template <typename Out, typename T>
__global__ void cumsum_kernel(int64_t lines, int64_t n, char* out, const char* in, int64_t out_step, int64_t in_step,
                              OffsetCalc<2> calc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < lines; line += stride) {
    int64_t o[2];
    calc.get(line, o);
    cumsum_line<Out, T, compute_t<T>>(out + o[0], out_step, in + o[1], in_step, n);
  }
}

__global__ void multinomial_kernel(int64_t rows, int64_t n, int64_t k, int64_t* out, double* work, bool replacement,
                                   uint64_t seed, uint64_t offset) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    multinomial_row(work + r * n, n, out + r * k, k, replacement, seed, offset, r);
  }
}

}  // namespace

void launch_cumsum(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0);
  const auto dim = static_cast<size_t>(call.arg<kargs::Dim>().dim);
  const int64_t n = in.sizes[dim];
  if (in.numel() == 0) return;
  TensorArg o = out, x = in;
  o.sizes[dim] = x.sizes[dim] = 1;
  LoopShape lines = make_loop_shape({&o, &x}, /*reorder=*/true);
  OffsetCalc<2> calc = make_offset_calc<2>(lines);
  dispatch_if<RealType_>(in.dtype, "cumsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<std::is_integral_v<T>, int64_t, T>;  // bool and integers: int64
    cumsum_kernel<Out, T><<<grid_blocks(lines.numel), kThreads, 0, stream>>>(
        lines.numel, n, static_cast<char*>(out.data), static_cast<const char*>(in.data),
        out.strides[dim] * static_cast<int64_t>(sizeof(Out)), in.strides[dim] * static_cast<int64_t>(sizeof(T)), calc);
  });
  check_launch(stream);
}

void launch_multinomial(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &work = call.outputs.at(1);
  const int64_t rows = work.sizes[0], n = work.sizes[1], k = out.sizes[1];
  if (rows == 0 || k == 0) return;
  multinomial_kernel<<<grid_blocks(rows), kThreads, 0, stream>>>(
      rows, n, k, static_cast<int64_t*>(out.data), static_cast<double*>(work.data),
      call.arg<kargs::Multinomial>().replacement, call.seed, call.offset);
  check_launch(stream);
}

}  // namespace ember::detail::driver
