// Tensor-tensor element-wise ops: arithmetic, comparisons, isclose.
#include <type_traits>

#include "kernels/op_name.h"
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/functors.h"

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
    case OpKind::Add: return arith(AddFn<C>{call.s0.to<C>()});
    case OpKind::Sub:
      EMBER_CHECK(!is_bool, TypeError,
                  "Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.");
      return arith(SubFn<C>{call.s0.to<C>()});
    case OpKind::Mul: return arith(MulFn<C>{});
    case OpKind::Div:
      if constexpr (std::is_integral_v<T>) check_no_zero_divisor(b);
      return arith(DivFn<C>{});
    case OpKind::Pow:
      if constexpr (is_bool) not_implemented(name, a.dtype);
      else return arith(PowFn<C>{});
    case OpKind::Eq: return compare(EqFn<C>{});
    case OpKind::Ne: return compare(NeFn<C>{});
    case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
      if constexpr (is_complex_v<T>) {
        not_implemented(name, a.dtype);
      } else {
        if (call.op == OpKind::Lt) return compare(LtFn<C>{});
        if (call.op == OpKind::Le) return compare(LeFn<C>{});
        if (call.op == OpKind::Gt) return compare(GtFn<C>{});
        return compare(GeFn<C>{});
      }
    case OpKind::IsClose: {
      using R = typename IsCloseFn<C>::R;
      return compare(IsCloseFn<C>{call.s0.to<R>(), call.s1.to<R>(), call.flag});
    }
    default: fail<ValueError>("cpu::run_binary: not a binary op: ", static_cast<int>(call.op));
  }
}

}  // namespace

void run_binary(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 2, ValueError,
              op_name(call.op), ": expected 1 output and 2 inputs, got ", call.outputs.size(), " and ",
              call.inputs.size());
  const TensorArg &out = call.outputs[0], &a = call.inputs[0], &b = call.inputs[1];
  EMBER_CHECK(a.dtype == b.dtype, TypeError, op_name(call.op), ": inputs must share a dtype, got '",
              scalar_type_name(a.dtype), "' and '", scalar_type_name(b.dtype), "'");
  dispatch(a.dtype, [&]<typename T>(TypeTag<T>) { run_typed<T>(call, out, a, b); });
}

}  // namespace ember::detail::cpu
