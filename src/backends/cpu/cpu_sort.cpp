// Sort (sort and topk) on the host. Each element of a line becomes a 64-bit key whose
// unsigned order is sorts_before's (kernels/line_bodies.h): NaN largest, -0.0 equal to 0.0,
// all bits flipped when descending. Sorting (key, position) pairs then gives the stable
// order the driver computes by ranking (Note [Line kernels]), with a comparison the
// compiler inlines; the first out0.sizes[dim] positions are written back with their values
// read from the input, so every bit (a NaN's payload, a zero's sign) survives. Compute
// types of 32 bits or fewer pack key and position into one word; a small k selects
// (Note [Small k selection]).
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

/// The same order for compute types of 32 bits or fewer (float, and the integers that fit).
template <typename C>
uint32_t order_key32(C value) {
  constexpr uint32_t kSign = uint32_t{1} << 31;
  if constexpr (std::is_floating_point_v<C>) {
    // Branch-free: the signs of random data defeat branch prediction.
    const uint32_t bits = value == 0 ? 0 : std::bit_cast<uint32_t>(value);  // -0.0 ties with 0.0
    const uint32_t key = bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | kSign);
    return value != value ? ~uint32_t{0} : key;
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<uint32_t>(static_cast<int32_t>(value)) ^ kSign;
  } else {
    return static_cast<uint32_t>(value);
  }
}

// Note [Small k selection]
// topk with a small k keeps the best k seen so far sorted in order[0, k) and walks the
// rest once: an element enters only when its (key, position) is below the k-th's, so
// among equal keys the earlier position stays first, exactly the stable order of a full
// sort. On random lines few elements enter (about k ln(n / k)), so this beats
// nth_element's partitioning of all n; an insertion moves up to k items, so a k past
// kInsertionK takes nth_element and a sort of the k instead.
// The test for entering compares values with sorts_before (kernels/line_bodies.h) before
// any key is made: equal values do not enter, as their later position sorts after.
// For compute types of 32 bits or fewer the key and the position share one 64-bit word
// (key high), so one integer comparison orders them.
constexpr int64_t kInsertionK = 32;

/// Inserts `item` into the sorted order[0, k) when it sorts before order[k - 1] (k >= 1).
template <typename Item>
inline void insert_if_smaller(Item* order, int64_t k, const Item& item) {
  if (!(item < order[k - 1])) return;
  int64_t at = k - 1;
  while (at > 0 && item < order[at - 1]) {
    order[at] = order[at - 1];
    --at;
  }
  order[at] = item;
}

/// The first k of `line`'s n items in ascending order, in order[0, k). Items are a total
/// order (positions break ties), so any correct selection gives the stable sort's prefix.
/// `beats(j, kth)`: whether item j sorts before the current k-th item `kth` (a cheaper test
/// than making item j, which only the winners pay).
template <typename Item, typename MakeItem, typename Beats>
void select_first_k(std::vector<Item>& order, int64_t n, int64_t k, MakeItem make_item, Beats beats) {
  if (k <= kInsertionK && k < n) {
    if (k == 0) return;
    order.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) order[j] = make_item(j);
    std::sort(order.begin(), order.end());
    for (int64_t j = k; j < n; ++j) {
      if (beats(j, order[k - 1])) insert_if_smaller(order.data(), k, make_item(j));
    }
    return;
  }
  order.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) order[j] = make_item(j);
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end());
  std::sort(order.begin(), order.begin() + k);
}

template <typename T>
void sort_typed(const KernelCall& call) {
  using C = compute_t<T>;
  const TensorArg &values = call.outputs[0], &indices = call.outputs[1], &in = call.inputs[0];
  const auto& args = call.arg<kargs::Sort>();
  const auto dim = static_cast<size_t>(args.dim);
  const int64_t n = in.sizes[dim], k = values.sizes[dim];
  const int64_t in_step = in.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t value_step = values.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t index_step = indices.strides[dim] * static_cast<int64_t>(sizeof(int64_t));
  const bool descending = args.descending;
  auto write = [&](const std::array<char*, 3>& line, int64_t j, int64_t from) {
    *reinterpret_cast<T*>(line[0] + j * value_step) = *reinterpret_cast<const T*>(line[2] + from * in_step);
    *reinterpret_cast<int64_t*>(line[1] + j * index_step) = from;
  };
  auto value_at = [in_step](const char* line, int64_t j) {
    return convert<C>(*reinterpret_cast<const T*>(line + j * in_step));
  };
  if constexpr (sizeof(C) <= 4) {
    if (n <= int64_t{UINT32_MAX}) {
      const uint64_t flip = descending ? ~uint64_t{0} << 32 : 0;
      for_each_line<3>({values, indices, in}, in.sizes, args.dim, n * 4, [&](const std::array<char*, 3>& line) {
        thread_local std::vector<uint64_t> order;
        select_first_k(
            order, n, k,
            [&](int64_t j) {
              return ((uint64_t{order_key32(value_at(line[2], j))} << 32) ^ flip) | static_cast<uint64_t>(j);
            },
            [&](int64_t j, uint64_t kth) {  // a later position must sort strictly before
              return sorts_before(value_at(line[2], j), value_at(line[2], static_cast<int64_t>(kth & UINT32_MAX)),
                                  descending);
            });
        for (int64_t j = 0; j < k; ++j) write(line, j, static_cast<int64_t>(order[j] & UINT32_MAX));
      });
      return;
    }
  }
  const uint64_t flip = descending ? ~uint64_t{0} : 0;
  for_each_line<3>({values, indices, in}, in.sizes, args.dim, n * 8, [&](const std::array<char*, 3>& line) {
    thread_local std::vector<std::pair<uint64_t, int64_t>> order;
    auto make_item = [&](int64_t j) { return std::pair{order_key(value_at(line[2], j)) ^ flip, j}; };
    select_first_k(order, n, k, make_item,
                   [&](int64_t j, const std::pair<uint64_t, int64_t>& kth) { return make_item(j) < kth; });
    for (int64_t j = 0; j < k; ++j) write(line, j, order[j].second);
  });
}

}  // namespace

void run_sort(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 2 && call.inputs.size() == 1, ValueError, "sort: expected 2 outputs and 1 input");
  const TensorArg& in = call.inputs[0];
  expect_dtype("sort", call.outputs[0], in.dtype);
  expect_dtype("sort", call.outputs[1], kInt64);
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (is_complex_v<T>) not_implemented("sort", in.dtype);
    else sort_typed<T>(call);
  });
}

}  // namespace ember::detail::cpu
