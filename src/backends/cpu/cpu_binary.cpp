// Tensor-tensor element-wise ops: arithmetic, comparisons, isclose.
#include <type_traits>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/functors.h"
#include "kernels/op_name.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void run_typed(const KernelCall& call, const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  using C = compute_t<T>;
  const char* name = op_name(call.op);
  constexpr bool is_bool = std::is_same_v<T, bool>;
  auto arith = [&](auto fn) {
    expect_dtype(name, out, a.dtype);
    map_binary<T, T>(out, a, b, fn);
  };
  auto compare = [&](auto fn) {
    expect_dtype(name, out, kBool);
    map_binary<bool, T>(out, a, b, fn);
  };
  switch (call.op) {
    case OpKind::Add: return arith(AddFn<C>{call.arg<kargs::Alpha>().alpha.to<C>()});
    case OpKind::Sub:
      EMBER_CHECK(!is_bool, TypeError,
                  "Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.");
      return arith(SubFn<C>{call.arg<kargs::Alpha>().alpha.to<C>()});
    case OpKind::Mul: return arith(MulFn<C>{});
    case OpKind::Div:
      if constexpr (std::is_integral_v<T>) check_no_zero_divisor(b);
      return arith(DivFn<C>{});
    case OpKind::Pow:
      if constexpr (is_bool) not_implemented(name, a.dtype);
      else return arith(PowFn<C>{});
        // Note [Declaring a binary op] (kernels/op_list.h): real floating dtypes only.
#define EMBER_CPU_FLOAT_BINARY(Kind, public_name, Functor, ...)      \
  case OpKind::Kind:                                                 \
    if constexpr (!is_floating_v<T>) not_implemented(name, a.dtype); \
    else return arith(Functor<C>{});                                 \
    break;
      EMBER_FLOAT_BINARY_OPS(EMBER_CPU_FLOAT_BINARY)
#undef EMBER_CPU_FLOAT_BINARY
      // EMBER_COMPARE_OPS (kernels/op_list.h): complex inputs only where the row takes them.
#define EMBER_CPU_COMPARE(Kind, public_name, Functor, complex_ok)                   \
  case OpKind::Kind:                                                                \
    if constexpr (is_complex_v<T> && !(complex_ok)) not_implemented(name, a.dtype); \
    else return compare(Functor<C>{});                                              \
    break;
      EMBER_COMPARE_OPS(EMBER_CPU_COMPARE)
#undef EMBER_CPU_COMPARE
    case OpKind::IsClose: {
      using R = typename IsCloseFn<C>::R;
      const auto& a = call.arg<kargs::IsClose>();
      return compare(IsCloseFn<C>{a.atol.to<R>(), a.rtol.to<R>(), a.equal_nan});
    }
    default: fail<ValueError>("cpu::run_binary: not a binary op: ", static_cast<int>(call.op));
  }
}

}  // namespace

void run_binary(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 2, ValueError, op_name(call.op),
              ": expected 1 output and 2 inputs, got ", call.outputs.size(), " and ", call.inputs.size());
  const TensorArg &out = call.outputs[0], &a = call.inputs[0], &b = call.inputs[1];
  EMBER_CHECK(a.dtype == b.dtype, TypeError, op_name(call.op), ": inputs must share a dtype, got '",
              scalar_type_name(a.dtype), "' and '", scalar_type_name(b.dtype), "'");
  dispatch(a.dtype, [&]<typename T>(TypeTag<T>) { run_typed<T>(call, out, a, b); });
}

}  // namespace ember::detail::cpu
