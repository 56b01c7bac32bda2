// Sort (sort and topk) on the host: each line copied out with its positions, ordered by
// sorts_before with ties broken by position (so std::sort gives the stable order), the
// first out0.sizes[dim] written back (Note [Line kernels] in kernels/line_bodies.h).
#include <algorithm>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_lines.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/line_bodies.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void sort_typed(const KernelCall& call) {
  using C = compute_t<T>;
  const TensorArg &values = call.outputs[0], &indices = call.outputs[1], &in = call.inputs[0];
  const auto dim = static_cast<size_t>(call.dim);
  const int64_t n = in.sizes[dim], k = values.sizes[dim];
  const int64_t in_step = in.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t value_step = values.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t index_step = indices.strides[dim] * static_cast<int64_t>(sizeof(int64_t));
  const bool descending = call.flag;
  auto before = [descending](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) {
    if (sorts_before(a.first, b.first, descending)) return true;
    return !sorts_before(b.first, a.first, descending) && a.second < b.second;
  };
  for_each_line<3>({values, indices, in}, in.sizes, call.dim, n * 8, [&](const std::array<char*, 3>& line) {
    thread_local std::vector<std::pair<C, int64_t>> order;
    order.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) order[j] = {convert<C>(*reinterpret_cast<const T*>(line[2] + j * in_step)), j};
    if (k < n) std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    else std::sort(order.begin(), order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      *reinterpret_cast<T*>(line[0] + j * value_step) = convert<T>(order[j].first);
      *reinterpret_cast<int64_t*>(line[1] + j * index_step) = order[j].second;
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
