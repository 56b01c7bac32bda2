// Sort (sort and topk) on the host. Each element of a line becomes a 64-bit key whose
// unsigned order is sorts_before's (kernels/line_bodies.h): NaN largest, -0.0 equal to 0.0,
// all bits flipped when descending. Sorting (key, position) pairs then gives the stable
// order the driver computes by ranking (Note [Line kernels]), with a comparison the
// compiler inlines; the first out0.sizes[dim] positions are written back with their values
// read from the input, so every bit (a NaN's payload, a zero's sign) survives.
#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_lines.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/line_bodies.h"

namespace ember::detail::cpu {
namespace {

constexpr uint64_t kSignBit = uint64_t{1} << 63;

/// The ascending order of compute values as unsigned 64-bit keys.
template <typename C>
uint64_t order_key(C value) {
  if constexpr (std::is_floating_point_v<C>) {
    double d = static_cast<double>(value);  // exact for float
    if (std::isnan(d)) return ~uint64_t{0};
    if (d == 0) d = 0.0;  // -0.0 ties with 0.0
    const uint64_t bits = std::bit_cast<uint64_t>(d);
    return (bits & kSignBit) ? ~bits : bits | kSignBit;
  } else {
    return static_cast<uint64_t>(static_cast<int64_t>(value)) ^ kSignBit;
  }
}

template <typename T>
void sort_typed(const KernelCall& call) {
  using C = compute_t<T>;
  const TensorArg &values = call.outputs[0], &indices = call.outputs[1], &in = call.inputs[0];
  const auto dim = static_cast<size_t>(call.dim);
  const int64_t n = in.sizes[dim], k = values.sizes[dim];
  const int64_t in_step = in.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t value_step = values.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t index_step = indices.strides[dim] * static_cast<int64_t>(sizeof(int64_t));
  const uint64_t flip = call.flag ? ~uint64_t{0} : 0;  // descending
  for_each_line<3>({values, indices, in}, in.sizes, call.dim, n * 8, [&](const std::array<char*, 3>& line) {
    thread_local std::vector<std::pair<uint64_t, int64_t>> order;
    order.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      order[j] = {order_key(convert<C>(*reinterpret_cast<const T*>(line[2] + j * in_step))) ^ flip, j};
    }
    // Keys with positions are a total order: select the first k, then sort them.
    if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end());
    std::sort(order.begin(), order.begin() + k);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t from = order[j].second;
      *reinterpret_cast<T*>(line[0] + j * value_step) = *reinterpret_cast<const T*>(line[2] + from * in_step);
      *reinterpret_cast<int64_t*>(line[1] + j * index_step) = from;
    }
  });
}

}  // namespace

void run_sort(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 2 && call.inputs.size() == 1, ValueError,
              "sort: expected 2 outputs and 1 input");
  const TensorArg& in = call.inputs[0];
  expect_dtype("sort", call.outputs[0], in.dtype);
  expect_dtype("sort", call.outputs[1], kInt64);
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (is_complex_v<T>) not_implemented("sort", in.dtype);
    else sort_typed<T>(call);
  });
}

}  // namespace ember::detail::cpu
