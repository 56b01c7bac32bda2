// Shared by test_cdist.cpp and test_tensordot.cpp: the inputs distance_expected.py makes, built
// the same way, and the comparison with its PyTorch 1.13 numbers.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distance_expected.h"
#include "ember/linalg_distance.h"
#include "test_support.h"

namespace ember::testing {

/// distance_expected.py's vals(): ((i * mul) % mod) * scale + offset for i < n.
inline std::vector<double> distance_values(int64_t n, int64_t mul, int64_t mod, double scale, double offset) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>((i * mul) % mod) * scale + offset;
  return out;
}

inline Tensor from_values(const std::vector<double>& v, const IntList& shape, Device device, DType dtype = kFloat64) {
  return tensor(TensorData(v), TensorOptions(kFloat64)).reshape(shape).to(dtype).to(device);
}

/// distance_expected.py's probe(): the weights of the loss sum(out * probe).
inline Tensor distance_probe(const IntList& shape, Device device) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 13) % 7 - 3) * 0.5;
  return from_values(v, shape, device);
}

inline const std::vector<double>& expected(const distance_expected::Case& c, const std::string& key) {
  for (const auto& [name, v] : c) {
    if (name == key) return v;
  }
  static const std::vector<double> none;
  ADD_FAILURE() << "no expected value '" << key << "'";
  return none;
}

/// Each element of `got` within tol (relative, plus tol absolute) of `want`; infinities equal.
inline void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what,
                          double tol = 1e-12) {
  ASSERT_TRUE(got.defined()) << what;
  const std::vector<double> g = got.detach().cpu().to(kFloat64).contiguous().reshape({-1}).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << what << " element " << i;
    } else {
      ASSERT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
    }
  }
}

}  // namespace ember::testing
