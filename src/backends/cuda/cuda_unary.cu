// Unary maps on the driver backend. abs of a complex tensor writes a real output (the
// op layer allocates it real); the functor returns the magnitude and the store converts.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <template <typename> class Allowed, template <typename> class Fn>
void run(const KernelCall& call, cudaStream_t stream, const char* name) {
  dispatch_if<Allowed>(call.inputs.at(0).dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T, T, 1>(call, stream, Fn<compute_t<T>>{});
  });
}

void run_abs(const KernelCall& call, cudaStream_t stream) {
  dispatch_if<AnyType>(call.inputs.at(0).dtype, "abs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_complex_v<T>) {
      launch_map<real_t<T>, T, 1>(call, stream, AbsFn<T>{});
    } else {
      launch_map<T, T, 1>(call, stream, AbsFn<compute_t<T>>{});
    }
  });
}

void run_relu(const KernelCall& call, cudaStream_t stream) {
  dispatch_if<RealNumericType>(call.inputs.at(0).dtype, "relu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_unsigned_v<T>) {
      launch_map<T, T, 1>(call, stream, AbsFn<T>{});  // relu of an unsigned value is the value (= abs)
    } else {
      launch_map<T, T, 1>(call, stream, ReluFn<compute_t<T>>{});
    }
  });
}

}  // namespace

void launch_unary(const KernelCall& call, cudaStream_t stream) {
  switch (call.op) {
    case OpKind::Neg:
      EMBER_CHECK(call.inputs.at(0).dtype != kBool, TypeError,
                  "Negation, the `-` operator, on a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      return run<NumericType, NegFn>(call, stream, "neg");
    case OpKind::Abs: return run_abs(call, stream);
    case OpKind::Relu:
      return run_relu(call, stream);
      // Note [Declaring an op] (kernels/unary_ops.h).
#define EMBER_CUDA_FLOAT_UNARY(Kind, name, Functor, ...)                                        \
  case OpKind::Kind:                                                                            \
    if constexpr (kRealOnlyUnary<Functor>) return run<FloatType, Functor>(call, stream, #name); \
    else return run<FloatComplexType, Functor>(call, stream, #name);
      EMBER_FLOAT_UNARY_OPS(EMBER_CUDA_FLOAT_UNARY)
#undef EMBER_CUDA_FLOAT_UNARY
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
