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
    launch_map<T, T, 1>(call, stream, Fn<C>{scalar_as<C>(call.s0)});
  });
}

}  // namespace

void launch_scalar_op(const KernelCall& call, cudaStream_t stream) {
  switch (call.op) {
    case OpKind::AddScalar: return run<AnyType, AddScalarFn>(call, stream, "add");
    case OpKind::MulScalar: return run<AnyType, MulScalarFn>(call, stream, "mul");
    case OpKind::PowScalar: return run<NumericType, PowScalarFn>(call, stream, "pow");
    case OpKind::RSubScalar:
      EMBER_CHECK(call.outputs.at(0).dtype != kBool, TypeError,
                  "Subtraction, the `-` operator, with a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      return run<NumericType, RSubScalarFn>(call, stream, "rsub");
    case OpKind::RDivScalar: return run<AnyType, RDivScalarFn>(call, stream, "div");
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
