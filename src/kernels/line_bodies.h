// Per-line kernel bodies of the ops that walk one dim in order (cumsum, sort, scatter_add,
// multinomial, the rows of triu and tril), written once for host and device.
//
// Note [Line kernels]
// A "line" is one position of every dim but `dim`: the executors find each line's base
// (cpu: a loop over the kept dims; driver: an OffsetCalc over them) and call a body below
// with byte strides along `dim`. Each body visits its line in index order with no state
// shared between lines, so lines run in parallel and every backend computes the same bits:
//   cumsum       accumulates serially (double for floating inputs, int64 for integers)
//   sort order   a strict weak order with NaN largest; executors break ties by position,
//                which makes any correct sort equal to a stable one (cpu: std::sort of
//                64-bit keys of the same order with positions; driver: each element ranked
//                by counting the elements before it)
//   scatter_add  adds src[k] into out at index[k] for k in order, so sums round the same
//                everywhere (no atomics); indices were checked before (cpu) or are asserted
//   multinomial  draws row r's sample s from Philox index offset + r * K + s
//   triangle     row r of a matrix keeps the columns triangle_columns gives and zeroes the rest
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/random.h"

namespace ember::detail {

/// cumsum's accumulator for compute type C: double for floating, int64 otherwise.
template <typename C>
using cumsum_acc_t = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;

/// out[k] = in[0] + ... + in[k] along one line of n elements (byte strides).
template <typename Out, typename In, typename C>
EMBER_HOST_DEVICE inline void cumsum_line(char* out, int64_t out_stride, const char* in, int64_t in_stride, int64_t n) {
  using A = cumsum_acc_t<C>;
  A acc = A(0);
  for (int64_t k = 0; k < n; ++k) {
    acc += static_cast<A>(convert<C>(*reinterpret_cast<const In*>(in + k * in_stride)));
    *reinterpret_cast<Out*>(out + k * out_stride) = convert<Out>(acc);
  }
}

/// True when `a` sorts strictly before `b` (NaN is the largest value; equal values and
/// two NaNs are ties).
template <typename C>
EMBER_HOST_DEVICE inline bool sorts_before(C a, C b, bool descending) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool a_nan = a != a, b_nan = b != b;
    return descending ? (a_nan && !b_nan) || a > b : (!a_nan && b_nan) || a < b;
  } else {
    return descending ? a > b : a < b;
  }
}

/// out[index[k]] += src[k] for the n elements of one line (out's byte stride along dim).
template <typename T, typename C>
EMBER_HOST_DEVICE inline void scatter_add_line(char* out, int64_t out_stride, const char* index, int64_t index_stride,
                                               const char* src, int64_t src_stride, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = *reinterpret_cast<const int64_t*>(index + k * index_stride);
    T* target = reinterpret_cast<T*>(out + i * out_stride);
    const C value = convert<C>(*reinterpret_cast<const T*>(src + k * src_stride));
    *target = convert<T>(static_cast<C>(convert<C>(*target) + value));
  }
}

/// Draws `k` samples into `out` from the `n` weights of `work` (row `row` of the call),
/// each by inverting the running sum of the weights left at a Philox uniform. Without
/// replacement a drawn category's weight becomes -1 (taken); once every category of
/// positive weight is taken, the untaken zero-weight ones follow in index order.
EMBER_HOST_DEVICE inline void multinomial_row(double* work, int64_t n, int64_t* out, int64_t k, bool replacement,
                                              uint64_t seed, uint64_t offset, int64_t row) {
  double total = 0;
  for (int64_t s = 0; s < k; ++s) {
    if (s == 0 || !replacement) {  // the weights left (with replacement they never change)
      total = 0;
      for (int64_t i = 0; i < n; ++i) total += work[i] > 0 ? work[i] : 0.0;
    }
    const double u = philox_uniform_double(seed, offset + static_cast<uint64_t>(row * k + s));
    int64_t chosen = -1;
    if (total > 0) {
      const double target = u * total;
      double running = 0;
      for (int64_t i = 0; i < n && chosen < 0; ++i) {
        if (work[i] <= 0) continue;
        running += work[i];
        // Rounding can leave target at or past the last running sum: take the last positive one.
        if (target < running || running >= total) chosen = i;
      }
    }
    for (int64_t i = 0; i < n && chosen < 0; ++i) {
      if (work[i] == 0) chosen = i;
    }
    out[s] = chosen;
    if (!replacement) work[chosen] = -1;
  }
}

/// The diagonal of triu/tril on a rows x cols matrix clamped to [-rows, cols]: the same
/// triangle, and row + diagonal cannot overflow.
EMBER_HOST_DEVICE inline int64_t clamp_diagonal(int64_t diagonal, int64_t rows, int64_t cols) {
  return diagonal < -rows ? -rows : (diagonal > cols ? cols : diagonal);
}

/// The columns [first, last) that row `row` of a triangle keeps among `cols`: column - row
/// >= diagonal (upper, triu) or <= diagonal (tril); `diagonal` clamped by clamp_diagonal.
EMBER_HOST_DEVICE inline void triangle_columns(int64_t row, int64_t diagonal, int64_t cols, bool upper, int64_t* first,
                                               int64_t* last) {
  const int64_t lo = upper ? row + diagonal : 0, hi = upper ? cols : row + diagonal + 1;
  *first = lo < 0 ? 0 : (lo > cols ? cols : lo);
  *last = hi < *first ? *first : (hi > cols ? cols : hi);
}

/// Row `row` of triu/tril over `cols` columns (byte strides): out = in on the kept columns, 0 elsewhere.
template <typename T>
EMBER_HOST_DEVICE inline void triangle_row(char* out, int64_t out_stride, const char* in, int64_t in_stride,
                                           int64_t cols, int64_t row, int64_t diagonal, bool upper) {
  int64_t first = 0, last = 0;
  triangle_columns(row, diagonal, cols, upper, &first, &last);
  for (int64_t j = 0; j < cols; ++j) {
    *reinterpret_cast<T*>(out + j * out_stride) =
        j >= first && j < last ? *reinterpret_cast<const T*>(in + j * in_stride) : T{};
  }
}

}  // namespace ember::detail
