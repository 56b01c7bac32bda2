// Copy (with dtype conversion) and Fill on the driver backend.
//
// Same-dtype copies move bits: one cudaMemcpyAsync when both sides are dense, else the
// element-wise engine over an unsigned type of the element's size, so the strided path
// is compiled 5 times rather than 12. Conversions are templated on the source type only
// and store through store_as (a warp-uniform switch on the destination dtype): 12
// kernels instead of 144, at no cost for a memory-bound loop.
#include "backends/cuda/cuda_loops.cuh"

#include <cstring>

namespace ember::detail::driver {
namespace {

template <typename T>
struct IdentityFn {
  EMBER_HOST_DEVICE T operator()(T a) const { return a; }
};

template <typename T>
struct ConstantFn {
  T value;
  EMBER_HOST_DEVICE T operator()() const { return value; }
};

template <typename Src>
__global__ void convert_kernel(int64_t n, char* out, DType out_dtype, const char* in, OffsetCalc<2> calc) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t offsets[2];
    calc.get(i, offsets);
    store_as(out + offsets[0], out_dtype, *reinterpret_cast<const Src*>(in + offsets[1]));
  }
}

}  // namespace

void launch_copy(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& out = call.outputs.at(0);
  const TensorArg& in = call.inputs.at(0);
  if (out.dtype == in.dtype) {
    LoopShape shape = make_loop_shape({&out, &in}, /*reorder=*/true);
    if (shape.numel == 0) return;
    size_t bytes = itemsize(out.dtype);
    if (shape.contiguous(0, bytes) && shape.contiguous(1, bytes)) {
      check_cuda(cudaMemcpyAsync(out.data, in.data, shape.numel * bytes, cudaMemcpyDeviceToDevice, stream));
      check_launch(stream);
      return;
    }
    dispatch_bits(bytes, [&](auto tag) {
      using U = typename decltype(tag)::type;
      launch_map<U, U, 1>(call, stream, IdentityFn<U>{});
    });
    return;
  }
  LoopShape shape = make_loop_shape({&out, &in}, /*reorder=*/true);
  if (shape.numel == 0) return;
  OffsetCalc<2> calc = make_offset_calc<2>(shape);
  dispatch_if<AnyType>(in.dtype, "copy", [&](auto tag) {
    using Src = typename decltype(tag)::type;
    convert_kernel<Src><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
        shape.numel, static_cast<char*>(out.data), out.dtype, static_cast<const char*>(in.data), calc);
  });
  check_launch(stream);
}

void launch_fill(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& out = call.outputs.at(0);
  // Convert the scalar once on the host with the shared rule, then fill raw bits.
  unsigned char bits[16] = {};
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value = call.arg<kargs::Value>().value.to<T>();
    std::memcpy(bits, &value, sizeof(T));
  });
  dispatch_bits(itemsize(out.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U value;
    std::memcpy(&value, bits, sizeof(U));
    launch_map<U, U, 0>(call, stream, ConstantFn<U>{value});
  });
}

}  // namespace ember::detail::driver
