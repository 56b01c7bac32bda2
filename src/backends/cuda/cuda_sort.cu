// Sort (sort and topk) on the driver backend, by rank: one thread per element finds where
// the element goes by counting the elements of its line that sort before it (sorts_before,
// ties broken by position: the stable order, Note [Line kernels] in kernels/line_bodies.h),
// and writes it there if that rank is among the first out0.sizes[dim]. No scratch memory and
// the cpu's order exactly; the work is quadratic in the line's length, which suits the
// short lines of sampling and attention (vocabularies, sequence lengths).
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/line_bodies.h"

namespace ember::detail::driver {
namespace {

template <typename T>
__global__ void sort_rank_kernel(int64_t lines, int64_t n, int64_t k, char* values, char* indices, const char* in,
                                 int64_t value_step, int64_t index_step, int64_t in_step, bool descending,
                                 OffsetCalc<3> calc) {
  using C = compute_t<T>;
  const int64_t total = lines * n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t line = t / n, i = t % n;
    int64_t o[3];
    calc.get(line, o);
    const char* x = in + o[2];
    const C v = convert<C>(*reinterpret_cast<const T*>(x + i * in_step));
    int64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) {
      const C w = convert<C>(*reinterpret_cast<const T*>(x + j * in_step));
      rank += sorts_before(w, v, descending) || (j < i && !sorts_before(v, w, descending)) ? 1 : 0;
    }
    if (rank < k) {
      *reinterpret_cast<T*>(values + o[0] + rank * value_step) = convert<T>(v);
      *reinterpret_cast<int64_t*>(indices + o[1] + rank * index_step) = i;
    }
  }
}

}  // namespace

void launch_sort(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &values = call.outputs.at(0), &indices = call.outputs.at(1), &in = call.inputs.at(0);
  const auto& args = call.arg<kargs::Sort>();
  const auto dim = static_cast<size_t>(args.dim);
  const int64_t n = in.sizes[dim], k = values.sizes[dim];
  if (in.numel() == 0 || k == 0) return;
  TensorArg v = values, ix = indices, x = in;
  v.sizes = ix.sizes = x.sizes = in.sizes;
  v.sizes[dim] = ix.sizes[dim] = x.sizes[dim] = 1;
  LoopShape lines = make_loop_shape({&v, &ix, &x}, /*reorder=*/true);
  OffsetCalc<3> calc = make_offset_calc<3>(lines);
  dispatch_if<RealType_>(in.dtype, "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto bytes = static_cast<int64_t>(sizeof(T));
    sort_rank_kernel<T><<<grid_blocks(lines.numel * n), kThreads, 0, stream>>>(
        lines.numel, n, k, static_cast<char*>(values.data), static_cast<char*>(indices.data),
        static_cast<const char*>(in.data), values.strides[dim] * bytes,
        indices.strides[dim] * static_cast<int64_t>(sizeof(int64_t)), in.strides[dim] * bytes, args.descending, calc);
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
