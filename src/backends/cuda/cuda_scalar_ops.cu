// Tensor-scalar arithmetic on the driver backend: AddScalar, MulScalar, PowScalar,
// RSubScalar, RDivScalar. The scalar is converted once, on the host, to the compute type.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <template <typename> class Allowed, template <typename> class Fn>
void run(const KernelCall& call, cudaStream_t stream, const char* name) {
  dispatch_if<Allowed>(call.outputs.at(0).dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    launch_map<T, T, 1>(call, stream, Fn<C>{scalar_as<C>(call.arg<kargs::Value>().value)});
  });
}

}  // namespace

void launch_scalar_op(const KernelCall& call, cudaStream_t stream) {
  EMBER_CHECK(call.op != OpKind::RSubScalar || call.outputs.at(0).dtype != kBool, TypeError,
              "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  switch (call.op) {
    // EMBER_SCALAR_OPS (kernels/op_list.h): bool tensors only where the row takes them.
#define EMBER_CUDA_SCALAR_OP(Kind, name, Functor, bool_ok)                    \
  case OpKind::Kind:                                                          \
    if constexpr (bool_ok) return run<AnyType, Functor>(call, stream, #name); \
    else return run<NumericType, Functor>(call, stream, #name);
    EMBER_SCALAR_OPS(EMBER_CUDA_SCALAR_OP)
#undef EMBER_CUDA_SCALAR_OP
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
