// Tensor-tensor arithmetic on the driver backend: Add, Sub (with alpha), Mul, Div, Pow,
// over the shared functors of kernels/functors.h.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <template <typename> class Allowed, template <typename> class Fn>
void run(const KernelCall& call, cudaStream_t stream, const char* name) {
  dispatch_if<Allowed>(call.outputs.at(0).dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (std::is_same_v<Fn<C>, AddFn<C>> || std::is_same_v<Fn<C>, SubFn<C>>) {
      launch_map<T, T, 2>(call, stream, Fn<C>{scalar_as<C>(call.arg<kargs::Alpha>().alpha)});
    } else {
      launch_map<T, T, 2>(call, stream, Fn<C>{});
    }
  });
}

}  // namespace

void launch_binary(const KernelCall& call, cudaStream_t stream) {
  switch (call.op) {
    case OpKind::Add: return run<AnyType, AddFn>(call, stream, "add");
    case OpKind::Sub:
      EMBER_CHECK(call.outputs.at(0).dtype != kBool, TypeError,
                  "Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.");
      return run<NumericType, SubFn>(call, stream, "sub");
    case OpKind::Mul: return run<AnyType, MulFn>(call, stream, "mul");
    // Integer division by zero gives 0 here (functors.h): a kernel cannot raise, and
    // checking the divisor first would cost a synchronization.
    case OpKind::Div: return run<AnyType, DivFn>(call, stream, "div");
    case OpKind::Pow:
      return run<NumericType, PowFn>(call, stream, "pow");
      // Note [Declaring a binary op] (kernels/op_list.h): real floating dtypes only.
#define EMBER_CUDA_FLOAT_BINARY(Kind, name, Functor, ...) \
  case OpKind::Kind: return run<FloatType, Functor>(call, stream, #name);
      EMBER_FLOAT_BINARY_OPS(EMBER_CUDA_FLOAT_BINARY)
#undef EMBER_CUDA_FLOAT_BINARY
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
