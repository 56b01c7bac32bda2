// cpu::run: the host executor's entry point, a table over OpKind made from the op list.
#include "backends/cpu/cpu_kernels.h"

#include <array>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "ember/errors.h"
#include "kernels/dtype_dispatch.h"

namespace ember::detail::cpu {

void not_implemented(const char* name, DType dtype) {
  fail<TypeError>("\"", name, "\" not implemented for '", scalar_type_name(dtype), "'");
}

void expect_dtype(const char* name, const TensorArg& arg, DType expected) {
  EMBER_CHECK(arg.dtype == expected, TypeError, name, ": expected a tensor of dtype '", scalar_type_name(expected),
              "' but got '", scalar_type_name(arg.dtype), "'");
}

void check_no_zero_divisor(const TensorArg& divisor) {
  dispatch(divisor.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (std::is_integral_v<T>) {
      LoopShape s = make_loop_shape({&divisor}, /*reorder=*/true);
      char* base[] = {static_cast<char*>(divisor.data)};
      bool zero = false;
      auto scan = [&](char* const* p, const int64_t* st, int64_t n) {
        for (int64_t i = 0; i < n; ++i) zero = zero || *reinterpret_cast<const T*>(p[0] + i * st[0]) == T(0);
      };
      for_each_row(s, base, 0, s.numel, scan);
      EMBER_CHECK(!zero, ValueError, "ZeroDivisionError");
    }
  });
}

namespace {

// The op list's cpu column (Note [The op list]): row i's runner at index i.
constexpr std::array kRunners = {
#define EMBER_OP_ROW(Kind, name, Family, cpu, ...) &run_##cpu,
    EMBER_OP_LIST
#undef EMBER_OP_ROW
};
static_assert(kRunners.size() == kOpCount, "one cpu runner per row of the op list");

}  // namespace

void run(const KernelCall& call) {
  const auto i = static_cast<size_t>(call.op);
  EMBER_CHECK(i < kOpCount, ValueError, "cpu::run: unknown op kind ", i);
  kRunners[i](call);
}

}  // namespace ember::detail::cpu
