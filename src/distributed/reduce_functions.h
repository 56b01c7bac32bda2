// Element-wise reductions handed to Gloo (its reduce hook: c = a op b over n elements)
// and AVG's final division, for every ember dtype, built from the kernels' own bodies:
// SUM is SumReducer's lane combine, PRODUCT MulFn, MAX and MIN are clamp_min(a, b) and
// clamp_max(a, b) (clamp_value, which is std::max and std::min to the bit, NaN included,
// as Gloo's own max and min), and AVG divides with DivFn.
//
// Half types reduce through float. Bool reduces as logic (SUM, MAX: or; PRODUCT, MIN:
// and), as PyTorch's ProcessGroupGloo. Complex tensors support SUM, AVG and PRODUCT
// only ("all_reduce does not support MIN on complex tensors").
#pragma once

#include <cstddef>
#include <functional>

#include "ember/distributed.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/functors.h"
#include "kernels/reducers.h"
#include "kernels/select_functors.h"

namespace ember::detail::distributed {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

/// c[i] = fn(a[i], b[i]) over n elements of T, `fn` taking and giving values of type V.
template <typename T, typename V, typename Fn>
void reduce_elements(void* c, const void* a, const void* b, size_t n, Fn fn) {
  auto* out = static_cast<T*>(c);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = convert<T>(fn(convert<V>(x[i]), convert<V>(y[i])));
}

/// The Gloo reduce function of `op` over T (AVG reduces as SUM, then divide()).
template <typename T>
ReduceFn reduce_function_of(ember::distributed::ReduceOp op) {
  using ember::distributed::ReduceOp;
  using C = compute_t<T>;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      return [](void* c, const void* a, const void* b, size_t n) {
        using Lane = typename SumReducer<T>::Lane;
        reduce_elements<T, Lane>(c, a, b, n, [](Lane x, Lane y) { return SumReducer<T>::lane_combine(x, y); });
      };
    case ReduceOp::PRODUCT:
      return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T, C>(c, a, b, n, MulFn<C>{}); };
    case ReduceOp::MIN:
      if constexpr (!is_complex_v<T>) {
        return [](void* c, const void* a, const void* b, size_t n) {
          reduce_elements<T, C>(c, a, b, n, [](C x, C y) { return ClampFn<C>{false, true}(x, y, y); });
        };
      }
      break;
    case ReduceOp::MAX:
      if constexpr (!is_complex_v<T>) {
        return [](void* c, const void* a, const void* b, size_t n) {
          reduce_elements<T, C>(c, a, b, n, [](C x, C y) { return ClampFn<C>{true, false}(x, y, y); });
        };
      }
      break;
  }
  return {};
}

/// The Gloo reduce function for `op` on `dtype` (AVG reduces as SUM, then divide()).
/// ValueError for MIN/MAX on complex tensors.
inline ReduceFn reduce_function(ember::distributed::ReduceOp op, DType dtype, const char* collective) {
  using ember::distributed::ReduceOp;
  EMBER_CHECK(!is_complex(dtype) || op == ReduceOp::SUM || op == ReduceOp::AVG || op == ReduceOp::PRODUCT, ValueError,
              collective, " does not support ", ember::distributed::reduce_op_name(op), " on complex tensors");
  return dispatch(dtype, [&](auto tag) -> ReduceFn { return reduce_function_of<typename decltype(tag)::type>(op); });
}

/// AVG's last step: data[i] /= world_size (integer types divide as integers, truncating
/// toward zero, as NCCL's ncclAvg; bool stays the logical or; complex values divide by
/// the real count).
inline void divide(void* data, DType dtype, size_t n, int world_size) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (is_complex_v<T>) {
      auto* p = static_cast<T*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<typename T::value_type>(world_size);
    } else if constexpr (!std::is_same_v<T, bool>) {
      auto* p = static_cast<T*>(data);
      const C count = static_cast<C>(world_size);
      for (size_t i = 0; i < n; ++i) p[i] = convert<T>(DivFn<C>{}(convert<C>(p[i]), count));
    }
  });
}

}  // namespace ember::detail::distributed
