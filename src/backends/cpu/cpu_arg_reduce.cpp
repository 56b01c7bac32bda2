// ArgMax and ArgMin: the index of the first extreme element along a dim, or of the
// whole tensor in row-major order (dim == -1). NaN is the extreme, as in PyTorch.
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/op_name.h"

namespace ember::detail::cpu {
namespace {

// Whether v replaces the current best (strictly better, so ties keep the first index).
template <bool kMax, typename A>
inline bool better(A v, A best) {
  if constexpr (std::is_floating_point_v<A>) {
    if (best != best) return false;
    if (v != v) return true;
  }
  return kMax ? v > best : v < best;
}

template <typename T, bool kMax>
int64_t scan(const char* p, int64_t stride, int64_t n) {
  using A = compute_t<T>;
  A best = convert<A>(*reinterpret_cast<const T*>(p));
  int64_t index = 0;
  for (int64_t i = 1; i < n; ++i) {
    const A v = convert<A>(*reinterpret_cast<const T*>(p + i * stride));
    if (better<kMax>(v, best)) best = v, index = i;
  }
  return index;
}

template <typename T, bool kMax>
void arg_reduce_typed(const TensorArg& out, const TensorArg& in, int64_t dim) {
  int64_t* result = static_cast<int64_t*>(out.data);
  if (dim == -1) {
    // Row-major over the input, never reordered: "first" means first in that order.
    using A = compute_t<T>;
    LoopShape s = make_loop_shape({&in}, /*reorder=*/false);
    char* base[] = {static_cast<char*>(in.data)};
    A best = convert<A>(*static_cast<const T*>(in.data));
    int64_t index = 0, position = 0;
    auto body = [&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const A v = convert<A>(*reinterpret_cast<const T*>(p[0] + i * st[0]));
        if (better<kMax>(v, best)) best = v, index = position + i;
      }
      position += n;
    };
    for_each_row(s, base, 0, s.numel, body);
    *result = index;
    return;
  }
  const int64_t n = in.sizes[dim];
  const int64_t dim_stride = in.strides[dim] * static_cast<int64_t>(sizeof(T));
  TensorArg in_kept = in;
  in_kept.sizes[dim] = 1;
  LoopShape s = make_loop_shape({&out, &in_kept}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  parallel_loop(
      s, base,
      [=](char* const* p, const int64_t* st, int64_t count) {
        for (int64_t i = 0; i < count; ++i) {
          *reinterpret_cast<int64_t*>(p[0] + i * st[0]) = scan<T, kMax>(p[1] + i * st[1], dim_stride, n);
        }
      },
      std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)));
}

}  // namespace

void run_arg_reduce(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError, op_name(call.op),
              ": expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  expect_dtype(op_name(call.op), out, kInt64);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  const int64_t dim = nd == 0 ? -1 : call.arg<kargs::Dim>().dim;
  EMBER_CHECK(dim >= -1 && dim < nd, IndexError, op_name(call.op), ": bad dim ", dim);
  EMBER_CHECK(in.numel() > 0, IndexError, op_name(call.op),
              "(): Expected reduction dim to be specified for input.numel() == 0.");
  const bool is_max = call.op == OpKind::ArgMax;
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (is_complex_v<T>) {
      not_implemented(is_max ? "argmax_cpu" : "argmin_cpu", in.dtype);
    } else if (is_max) {
      arg_reduce_typed<T, true>(out, in, dim);
    } else {
      arg_reduce_typed<T, false>(out, in, dim);
    }
  });
}

}  // namespace ember::detail::cpu
