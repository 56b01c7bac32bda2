// index_select on the driver backend: out = in0.index_select(dim, in1).
//
// Elements move as raw bits (one kernel per element size and index type). The loop runs
// over the output with three operands: the output, the input with a zero stride along
// `dim`, and the index tensor with its stride along `dim` and zero elsewhere; so after
// coalescing each element finds its index entry without recovering coordinates.
//
// An index out of range is a kernel error, as on a GPU under PyTorch: the kernel fails
// a device assert, CUDA marks the context, and the next synchronizing call raises
// CudaError "CUDA error: device-side assert triggered" (at the launch itself under
// CUDA_LAUNCH_BLOCKING=1). The assert stays in release builds on purpose: NDEBUG must
// not turn it into a silent out-of-bounds read.
#ifdef NDEBUG
#undef NDEBUG
#endif
#include <cassert>

#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <typename U, typename Index>
__global__ void index_select_kernel(int64_t n, char* out, const char* in, const char* index, int64_t dim_size,
                                    int64_t dim_stride, OffsetCalc<3> calc) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t offsets[3];
    calc.get(i, offsets);
    int64_t selected = static_cast<int64_t>(*reinterpret_cast<const Index*>(index + offsets[2]));
    assert(selected >= 0 && selected < dim_size && "index out of range in self");
    *reinterpret_cast<U*>(out + offsets[0]) = *reinterpret_cast<const U*>(in + offsets[1] + selected * dim_stride);
  }
}

}  // namespace

void launch_index_select(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& out = call.outputs.at(0);
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& index = call.inputs.at(1);
  const int64_t along = call.arg<kargs::Dim>().dim;
  auto dim = static_cast<size_t>(along);
  EMBER_ASSERT(dim < in.sizes.size() || (in.sizes.empty() && along == 0));
  EMBER_CHECK(index.dtype == kInt64 || index.dtype == kInt32, TypeError,
              "index_select(): Expected dtype int32 or int64 for index");
  if (out.numel() == 0) return;
  // A 0-dim input selects along its only "dim" of size 1: one element per index.
  int64_t dim_size = in.sizes.empty() ? 1 : in.sizes[dim];
  int64_t dim_stride = in.sizes.empty() ? 0 : in.strides[dim] * static_cast<int64_t>(itemsize(in.dtype));

  TensorArg in_view = in, index_view = index;
  in_view.sizes = out.sizes;
  in_view.strides = in.sizes.empty() ? DimList(out.sizes.size(), 0) : in.strides;
  index_view.sizes = out.sizes;
  index_view.strides.assign(out.sizes.size(), 0);
  if (!out.sizes.empty()) {
    size_t out_dim = in.sizes.empty() ? 0 : dim;
    in_view.strides[out_dim] = 0;
    index_view.strides[out_dim] = index.strides.empty() ? 0 : index.strides[0];
  }
  LoopShape shape = make_loop_shape({&out, &in_view, &index_view}, /*reorder=*/true);
  OffsetCalc<3> calc = make_offset_calc<3>(shape);
  dispatch_bits(itemsize(in.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    auto* out_ptr = static_cast<char*>(out.data);
    auto* in_ptr = static_cast<const char*>(in.data);
    auto* index_ptr = static_cast<const char*>(index.data);
    if (index.dtype == kInt64) {
      index_select_kernel<U, int64_t><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
          shape.numel, out_ptr, in_ptr, index_ptr, dim_size, dim_stride, calc);
    } else {
      index_select_kernel<U, int32_t><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
          shape.numel, out_ptr, in_ptr, index_ptr, dim_size, dim_stride, calc);
    }
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
