// Cumsum on the host: each line summed serially by cumsum_line (Note [Line kernels] in
// kernels/line_bodies.h), so every backend rounds alike.
#include "backends/cpu/cpu_lines.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/line_bodies.h"

namespace ember::detail::cpu {

void run_cumsum(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError, "cumsum: expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  const int64_t along = call.arg<kargs::Dim>().dim;
  const auto dim = static_cast<size_t>(along);
  const int64_t n = in.sizes[dim];
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (is_complex_v<T>) {
      not_implemented("cumsum", in.dtype);
    } else {
      using C = compute_t<T>;
      using Out = std::conditional_t<std::is_integral_v<T>, int64_t, T>;  // bool and integers: int64
      expect_dtype("cumsum", out, std::is_integral_v<T> ? kInt64 : in.dtype);
      const int64_t out_step = out.strides[dim] * static_cast<int64_t>(sizeof(Out));
      const int64_t in_step = in.strides[dim] * static_cast<int64_t>(sizeof(T));
      for_each_line<2>({out, in}, in.sizes, along, n, [&](const std::array<char*, 2>& line) {
        cumsum_line<Out, T, C>(line[0], out_step, line[1], in_step, n);
      });
    }
  });
}

void run_multinomial(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 2 && call.inputs.empty(), ValueError,
              "multinomial: expected 2 outputs and no input");
  const TensorArg &out = call.outputs[0], &work = call.outputs[1];
  expect_dtype("multinomial", out, kInt64);
  expect_dtype("multinomial", work, kFloat64);
  const int64_t rows = work.sizes[0], n = work.sizes[1], k = out.sizes[1];
  auto* samples = static_cast<int64_t*>(out.data);
  auto* weights = static_cast<double*>(work.data);
  const uint64_t seed = call.seed, offset = call.offset;
  const bool replacement = call.arg<kargs::Multinomial>().replacement;
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n * k)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      multinomial_row(weights + r * n, n, samples + r * k, k, replacement, seed, offset, r);
  });
}

}  // namespace ember::detail::cpu
