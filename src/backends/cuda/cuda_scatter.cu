// Gather and ScatterAdd on the driver backend.
//
// gather: one thread per output element, over three operands as index_select's kernel (the
// output, the input with stride 0 along `dim`, the index). scatter_add: one thread per line
// of the index, adding in order (Note [Line kernels] in kernels/line_bodies.h): no atomics,
// and the cpu's sums bit for bit. An index out of range is a kernel error, as on a GPU under
// PyTorch: a device assert (kept in release builds on purpose, see cuda_index_select.cu)
// that the next synchronizing call reports as CudaError "device-side assert triggered".
#ifdef NDEBUG
#undef NDEBUG
#endif
#include <cassert>

#include "backends/cuda/cuda_loops.cuh"
#include "kernels/line_bodies.h"

namespace ember::detail::driver {
namespace {

template <typename U>
__global__ void gather_kernel(int64_t n, char* out, const char* in, const char* index, int64_t dim_size,
                              int64_t dim_step, OffsetCalc<3> calc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t o[3];
    calc.get(i, o);
    const int64_t k = *reinterpret_cast<const int64_t*>(index + o[2]);
    assert(k >= 0 && k < dim_size && "index out of bounds");
    *reinterpret_cast<U*>(out + o[0]) = *reinterpret_cast<const U*>(in + o[1] + k * dim_step);
  }
}

template <typename T>
__global__ void scatter_add_kernel(int64_t lines, int64_t n, char* out, const char* index, const char* src,
                                   int64_t dim_size, int64_t out_step, int64_t index_step, int64_t src_step,
                                   OffsetCalc<3> calc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < lines; line += stride) {
    int64_t o[3];
    calc.get(line, o);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = *reinterpret_cast<const int64_t*>(index + o[1] + k * index_step);
      assert(i >= 0 && i < dim_size && "index out of bounds");
    }
    scatter_add_line<T, compute_t<T>>(out + o[0], out_step, index + o[1], index_step, src + o[2], src_step, n);
  }
}

void launch_gather(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0), &index = call.inputs.at(1);
  const auto dim = static_cast<size_t>(call.arg<kargs::Dim>().dim);
  EMBER_CHECK(index.dtype == kInt64, TypeError, "gather(): Expected dtype int64 for index");
  if (out.numel() == 0) return;
  TensorArg base = in;
  base.sizes = out.sizes;
  base.strides[dim] = 0;
  LoopShape shape = make_loop_shape({&out, &base, &index}, /*reorder=*/true);
  OffsetCalc<3> calc = make_offset_calc<3>(shape);
  const int64_t step = in.strides[dim] * static_cast<int64_t>(itemsize(in.dtype));
  dispatch_bits(itemsize(in.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    gather_kernel<U><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
        shape.numel, static_cast<char*>(out.data), static_cast<const char*>(in.data),
        static_cast<const char*>(index.data), in.sizes[dim], step, calc);
  });
  check_launch(stream);
}

void launch_scatter_add(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &index = call.inputs.at(0), &src = call.inputs.at(1);
  const auto dim = static_cast<size_t>(call.arg<kargs::Dim>().dim);
  EMBER_CHECK(index.dtype == kInt64, TypeError, "scatter_add_(): Expected dtype int64 for index");
  if (index.numel() == 0) return;
  TensorArg o = out, ix = index, s = src;
  o.sizes = ix.sizes = s.sizes = index.sizes;
  o.sizes[dim] = ix.sizes[dim] = s.sizes[dim] = 1;
  LoopShape lines = make_loop_shape({&o, &ix, &s}, /*reorder=*/true);
  OffsetCalc<3> calc = make_offset_calc<3>(lines);
  dispatch_if<RealType_>(out.dtype, "scatter_add_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto bytes = static_cast<int64_t>(sizeof(T));
    scatter_add_kernel<T><<<grid_blocks(lines.numel), kThreads, 0, stream>>>(
        lines.numel, index.sizes[dim], static_cast<char*>(out.data), static_cast<const char*>(index.data),
        static_cast<const char*>(src.data), out.sizes[dim], out.strides[dim] * bytes,
        index.strides[dim] * static_cast<int64_t>(sizeof(int64_t)), src.strides[dim] * bytes, calc);
  });
  check_launch(stream);
}

}  // namespace

void launch_scatter(const KernelCall& call, cudaStream_t stream) {
  if (call.op == OpKind::Gather) return launch_gather(call, stream);
  return launch_scatter_add(call, stream);
}

}  // namespace ember::detail::driver
