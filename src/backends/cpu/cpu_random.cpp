// Normal, Uniform and Arange: values depend only on each element's row-major index
// (kernels/random.h), so the loop keeps row-major order (no dim reordering) and
// passes each row's starting index to the body.
#include <type_traits>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/random.h"

namespace ember::detail::cpu {
namespace {

// Runs value(i) -> T for every element i of out, in row-major numbering.
template <typename T, typename ValueFn>
void generate(const TensorArg& out, ValueFn value) {
  LoopShape s = make_loop_shape({&out}, /*reorder=*/false);
  char* base[] = {static_cast<char*>(out.data)};
  parallel_for(0, s.numel, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t index = begin;
    auto body = [&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * st[0]) = value(index + i);
      index += n;
    };
    for_each_row(s, base, begin, end, body);
  });
}

template <typename T>
void run_typed(const KernelCall& call, const TensorArg& out) {
  constexpr bool kFloating = is_floating_v<T>;
  using R = std::conditional_t<std::is_same_v<T, double>, double, float>;  // draw precision
  // A replayed graph's random op reads its seed and base offset now (Note [Graph-safe Philox]).
  const uint64_t seed = call.philox_seed_ptr ? static_cast<uint64_t>(*call.philox_seed_ptr) : call.seed;
  const uint64_t offset = call.offset + (call.philox_offset_ptr ? static_cast<uint64_t>(*call.philox_offset_ptr) : 0);
  switch (call.op) {
    case OpKind::Normal:
      if constexpr (!kFloating) {
        not_implemented("normal_kernel_cpu", out.dtype);
      } else {
        const R mean = call.s0.to<R>(), std = call.s1.to<R>();
        return generate<T>(out, [=](int64_t i) { return T(normal_at<R>(seed, offset, i, mean, std)); });
      }
    case OpKind::Uniform:
      if constexpr (!kFloating) {
        not_implemented("uniform_kernel_cpu", out.dtype);
      } else {
        const R from = call.s0.to<R>(), to = call.s1.to<R>();
        return generate<T>(out, [=](int64_t i) { return uniform_value<T, R>(seed, offset, i, from, to); });
      }
    case OpKind::Arange:
      if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
        not_implemented("arange_cpu", out.dtype);
      } else if constexpr (kFloating) {
        // Computed in double like PyTorch's accumulate type, then rounded once.
        const double start = call.s0.to<double>(), step = call.s1.to<double>();
        return generate<T>(out, [=](int64_t i) { return convert<T>(start + static_cast<double>(i) * step); });
      } else {
        const int64_t start = call.s0.to<int64_t>(), step = call.s1.to<int64_t>();
        return generate<T>(out, [=](int64_t i) { return convert<T>(start + i * step); });
      }
    default: fail<ValueError>("cpu::run_random: not a random op: ", static_cast<int>(call.op));
  }
}

}  // namespace

void run_random(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1, ValueError, "random op: expected 1 output");
  const TensorArg& out = call.outputs[0];
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) { run_typed<T>(call, out); });
}

}  // namespace ember::detail::cpu
