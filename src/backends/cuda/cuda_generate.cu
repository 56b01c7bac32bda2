// Index-generated outputs on the driver backend: Normal, Uniform (Philox, the same
// numbers as every other backend for the same seed and offset) and Arange.
//
// Element i is the i-th element of the output in row-major order, whatever its strides,
// so the loop shape is never reordered here (kernels/random.h: a value depends only on
// seed, offset and i).
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/random.h"

namespace ember::detail::driver {
namespace {

template <typename Out, typename Gen>
__global__ void generate_kernel(int64_t n, char* out, OffsetCalc<1> calc, Gen gen) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t offset[1];
    calc.get(i, offset);
    *reinterpret_cast<Out*>(out + offset[0]) = convert<Out>(gen(i));
  }
}

// A call's Philox seed and offset; a captured call reads them from device memory when it
// runs, so each replay of its graph draws new numbers (Note [Graph-safe Philox]).
struct PhiloxArgs {
  uint64_t seed, offset;
  const int64_t* seed_ptr;
  const int64_t* offset_ptr;
  explicit PhiloxArgs(const KernelCall& call)
      : seed(call.seed), offset(call.offset), seed_ptr(call.philox_seed_ptr), offset_ptr(call.philox_offset_ptr) {}
  __device__ uint64_t current_seed() const { return seed_ptr ? static_cast<uint64_t>(*seed_ptr) : seed; }
  __device__ uint64_t current_offset() const { return offset + (offset_ptr ? static_cast<uint64_t>(*offset_ptr) : 0); }
};

template <typename R>
struct NormalGen {
  PhiloxArgs philox;
  R mean, std;
  __device__ R operator()(int64_t i) const {
    return normal_at<R>(philox.current_seed(), philox.current_offset(), static_cast<uint64_t>(i), mean, std);
  }
};

template <typename T, typename R>
struct UniformGen {
  PhiloxArgs philox;
  R from, to;
  __device__ T operator()(int64_t i) const {
    return uniform_value<T, R>(philox.current_seed(), philox.current_offset(), static_cast<uint64_t>(i), from, to);
  }
};

/// start + i * step in int64 for integers and double otherwise, then converted.
template <typename V>
struct ArangeGen {
  V start, step;
  __device__ V operator()(int64_t i) const { return start + static_cast<V>(i) * step; }
};

template <typename Out, typename Gen>
void generate(const KernelCall& call, cudaStream_t stream, const Gen& gen) {
  const TensorArg& out = call.outputs.at(0);
  LoopShape shape = make_loop_shape({&out}, /*reorder=*/false);
  if (shape.numel == 0) return;
  generate_kernel<Out><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(shape.numel, static_cast<char*>(out.data),
                                                                          make_offset_calc<1>(shape), gen);
  check_launch(stream);
}

}  // namespace

void launch_generate(const KernelCall& call, cudaStream_t stream) {
  DType dtype = call.outputs.at(0).dtype;
  switch (call.op) {
    case OpKind::Normal:
      return dispatch_if<FloatType>(dtype, "normal", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using R = std::conditional_t<std::is_same_v<T, double>, double, float>;
        generate<T>(call, stream,
                    NormalGen<R>{PhiloxArgs(call), call.arg<kargs::Normal>().mean.to<R>(),
                                 call.arg<kargs::Normal>().std.to<R>()});
      });
    case OpKind::Uniform:
      return dispatch_if<FloatType>(dtype, "uniform", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using R = std::conditional_t<std::is_same_v<T, double>, double, float>;
        generate<T>(call, stream,
                    UniformGen<T, R>{PhiloxArgs(call), call.arg<kargs::Uniform>().from.to<R>(),
                                     call.arg<kargs::Uniform>().to.to<R>()});
      });
    case OpKind::Arange:
      return dispatch_if<RealNumericType>(dtype, "arange", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using V = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
        generate<T>(call, stream,
                    ArangeGen<V>{call.arg<kargs::Arange>().start.to<V>(), call.arg<kargs::Arange>().step.to<V>()});
      });
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
