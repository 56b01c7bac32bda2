// Element-wise reductions handed to Gloo (its reduce hook: c = a op b over n elements)
// and AVG's final division, for every ember dtype.
//
// Half types reduce through float. Bool reduces as logic (SUM, MAX: or; PRODUCT, MIN:
// and), as PyTorch's ProcessGroupGloo. Complex tensors support SUM, AVG and PRODUCT
// only ("all_reduce does not support MIN on complex tensors").
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>

#include "ember/distributed.h"
#include "kernels/dtype_dispatch.h"

namespace ember::detail::distributed {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

template <typename T, typename Op>
void reduce_elements(void* c, const void* a, const void* b, size_t n, Op op) {
  auto* out = static_cast<T*>(c);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (is_reduced_float_v<T>) {
      out[i] = T(op(static_cast<float>(x[i]), static_cast<float>(y[i])));
    } else {
      out[i] = static_cast<T>(op(x[i], y[i]));
    }
  }
}

/// The Gloo reduce function for `op` on `dtype` (AVG reduces as SUM, then divide()).
/// ValueError for MIN/MAX on complex tensors.
inline ReduceFn reduce_function(ember::distributed::ReduceOp op, DType dtype, const char* collective) {
  using ember::distributed::ReduceOp;
  EMBER_CHECK(!is_complex(dtype) || op == ReduceOp::SUM || op == ReduceOp::AVG || op == ReduceOp::PRODUCT,
              ValueError, collective, " does not support ", ember::distributed::reduce_op_name(op),
              " on complex tensors");
  return dispatch(dtype, [&](auto tag) -> ReduceFn {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      if (op == ReduceOp::PRODUCT || op == ReduceOp::MIN) {
        return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::logical_and<>()); };
      }
      return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::logical_or<>()); };
    } else if constexpr (is_complex_v<T>) {
      if (op == ReduceOp::PRODUCT) {
        return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::multiplies<>()); };
      }
      return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::plus<>()); };
    } else {
      switch (op) {
        case ReduceOp::SUM:
        case ReduceOp::AVG:
          return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::plus<>()); };
        case ReduceOp::PRODUCT:
          return [](void* c, const void* a, const void* b, size_t n) { reduce_elements<T>(c, a, b, n, std::multiplies<>()); };
        case ReduceOp::MIN:
          return [](void* c, const void* a, const void* b, size_t n) {
            reduce_elements<T>(c, a, b, n, [](auto x, auto y) { return std::min(x, y); });
          };
        case ReduceOp::MAX:
          return [](void* c, const void* a, const void* b, size_t n) {
            reduce_elements<T>(c, a, b, n, [](auto x, auto y) { return std::max(x, y); });
          };
      }
      return {};
    }
  });
}

/// AVG's last step: data[i] /= world_size (integer types divide as integers, truncating
/// toward zero, as NCCL's ncclAvg; bool stays the logical or).
inline void divide(void* data, DType dtype, size_t n, int world_size) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      auto* p = static_cast<T*>(data);
      for (size_t i = 0; i < n; ++i) {
        if constexpr (is_reduced_float_v<T>) {
          p[i] = T(static_cast<float>(p[i]) / static_cast<float>(world_size));
        } else if constexpr (is_complex_v<T>) {
          p[i] /= static_cast<typename T::value_type>(world_size);
        } else {
          p[i] = static_cast<T>(p[i] / static_cast<T>(world_size));
        }
      }
    }
  });
}

}  // namespace ember::detail::distributed
