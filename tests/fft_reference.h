// Host reference for the FFT tests: direct DFT sums in double precision.
#pragma once

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "ember/ember.h"

namespace ember::testing {

using cdouble = std::complex<double>;

/// The DFT of row-major `values` of `shape` along `dim`, trimmed or zero-padded to `n`
/// points: out[.., k, ..] = scale * sum_j in[.., j, ..] exp(sign * 2 pi i j k / n).
inline std::vector<cdouble> reference_dft(const std::vector<cdouble>& values, const IntList& shape, int64_t dim,
                                          int64_t n, int sign, double scale) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[dim], used = std::min(len, n);
  std::vector<cdouble> out(static_cast<size_t>(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        cdouble sum = 0;
        for (int64_t j = 0; j < used; ++j)
          sum += values[(o * len + j) * inner + i] *
                 std::polar(1.0, sign * 2 * std::numbers::pi * double(j * k % n) / double(n));
        out[(o * n + k) * inner + i] = scale * sum;
      }
  return out;
}

inline double max_abs_diff(const std::vector<cdouble>& a, const std::vector<cdouble>& b) {
  double e = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

}  // namespace ember::testing
