// Where, Clamp and ClampScalar on the driver backend, over the shared bodies of
// kernels/select_functors.h. ClampScalar is a one-input map; Where and Clamp have three
// inputs, which take a strided kernel with one OffsetCalc over all four operands.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/select_functors.h"

namespace ember::detail::driver {
namespace {

template <typename T, typename A, typename Op>
__global__ void ternary_kernel(int64_t n, char* out, const char* a, const char* b, const char* c, OffsetCalc<4> calc,
                               Op op) {
  using C = compute_t<T>;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t o[4];
    calc.get(i, o);
    const A x = *reinterpret_cast<const A*>(a + o[1]);
    const T y = *reinterpret_cast<const T*>(b + o[2]);
    const T z = *reinterpret_cast<const T*>(c + o[3]);
    *reinterpret_cast<T*>(out + o[0]) = convert<T>(op(convert<compute_t<A>>(x), convert<C>(y), convert<C>(z)));
  }
}

template <typename T, typename A, typename Op>
void launch_ternary(const KernelCall& call, cudaStream_t stream, const Op& op) {
  const TensorArg& out = call.outputs.at(0);
  LoopShape shape = make_loop_shape({&out, &call.inputs.at(0), &call.inputs.at(1), &call.inputs.at(2)}, true);
  if (shape.numel == 0) return;
  ternary_kernel<T, A><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
      shape.numel, static_cast<char*>(out.data), static_cast<const char*>(call.inputs[0].data),
      static_cast<const char*>(call.inputs[1].data), static_cast<const char*>(call.inputs[2].data),
      make_offset_calc<4>(shape), op);
  check_launch(stream);
}

}  // namespace

void launch_select(const KernelCall& call, cudaStream_t stream) {
  const DType dtype = call.outputs.at(0).dtype;
  switch (call.op) {
    case OpKind::Where:
      EMBER_CHECK(call.inputs.at(0).dtype == kBool, TypeError, "where expected condition to be a boolean tensor");
      return dispatch_if<AnyType>(dtype, "where", [&](auto tag) {
        using T = typename decltype(tag)::type;
        launch_ternary<T, bool>(call, stream, WhereFn<compute_t<T>>{});
      });
    case OpKind::Clamp:
      return dispatch_if<RealType_>(dtype, "clamp", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const auto& a = call.arg<kargs::Clamp>();
        launch_ternary<T, T>(call, stream, ClampFn<compute_t<T>>{a.has_min, a.has_max});
      });
    case OpKind::ClampScalar:
      return dispatch_if<RealType_>(dtype, "clamp", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = compute_t<T>;
        const auto& a = call.arg<kargs::ClampScalar>();
        launch_map<T, T, 1>(call, stream,
                            ClampScalarFn<C>{scalar_as<C>(a.min), scalar_as<C>(a.max), a.has_min, a.has_max});
      });
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
