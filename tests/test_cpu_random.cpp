// Normal, Uniform and Arange on the host: Philox determinism, statistics, strides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu_kernel_test_util.h"
#include "ember/errors.h"
#include "kernels/random.h"

namespace ember::test {
namespace {

template <typename T>
std::vector<T> draw(OpKind op, int64_t n, uint64_t seed, uint64_t offset, Scalar s0, Scalar s1) {
  std::vector<T> out(static_cast<size_t>(n));
  KernelCall c = call(op, {arg(out, {n})}, {}, s0, s1);
  c.seed = seed;
  c.offset = offset;
  run(c);
  return out;
}

TEST(CpuRandom, SameSeedSameNumbers) {
  auto a = draw<float>(OpKind::Normal, 100000, 42, 0, 0.0, 1.0);
  auto b = draw<float>(OpKind::Normal, 100000, 42, 0, 0.0, 1.0);
  auto c = draw<float>(OpKind::Normal, 100000, 43, 0, 0.0, 1.0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Element i is a function of (seed, offset + i) only: matches the shared body.
  EXPECT_EQ(a[77777], detail::normal_at<float>(42, 0, 77777, 0.0f, 1.0f));
}

// The cpu computes each Philox block once for the elements sharing it (Note [Normal by
// Philox blocks]): every element still equals normal_at's, for offsets that start mid-block
// and batch boundaries (32 floats, 16 doubles), and for the offsets that take normal_at.
TEST(CpuRandom, NormalEqualsTheSharedBodyElementByElement) {
  for (uint64_t offset : {0u, 2u, 4u, 6u, 8u, 1u, 12u}) {
    SCOPED_TRACE(offset);
    const int64_t n = 1000 + static_cast<int64_t>(offset);
    auto f = draw<float>(OpKind::Normal, n, 77, offset, 0.5, 2.0);
    auto d = draw<double>(OpKind::Normal, n, 77, offset, 0.5, 2.0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(f[i], detail::normal_at<float>(77, offset, static_cast<uint64_t>(i), 0.5f, 2.0f)) << i;
      ASSERT_EQ(d[i], detail::normal_at<double>(77, offset, static_cast<uint64_t>(i), 0.5, 2.0)) << i;
    }
  }
}

// float Box-Muller's own log and cos (Note [Box-Muller in float]) against double precision
// over every input a float draw can give them (x = 1 - u and t = u, u a multiple of 2^-24),
// sampled with a stride: log within 2 ulp of its result, cos within 2^-23 absolutely.
TEST(CpuRandom, BoxMullerLogAndCosAreAccurate) {
  double worst_log_ulps = 0, worst_cos = 0;
  for (uint32_t k = 0; k < (1u << 24); k += 7) {
    const float u = static_cast<float>(k) * (1.0f / 16777216.0f);
    const float x = 1.0f - u;
    const double log_exact = std::log(static_cast<double>(x));
    const float log_got = detail::box_muller_log(x);
    if (log_exact != 0) {
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(log_exact)) - 23);
      worst_log_ulps = std::max(worst_log_ulps, std::abs(log_got - log_exact) / ulp);
    } else {
      ASSERT_EQ(log_got, 0.0f);
    }
    const double cos_exact = std::cos(6.283185307179586476925286766559 * static_cast<double>(u));
    worst_cos = std::max(worst_cos, std::abs(detail::box_muller_cos(u) - cos_exact));
  }
  EXPECT_LE(worst_log_ulps, 2.0);
  EXPECT_LE(worst_cos, std::ldexp(1.0, -23));
}

TEST(CpuRandom, OffsetContinuesTheStream) {
  // Uniform element i uses stream index offset + i, so two halves equal one draw.
  auto whole = draw<double>(OpKind::Uniform, 100000, 5, 0, 0.0, 1.0);
  auto tail = draw<double>(OpKind::Uniform, 50000, 5, 50000, 0.0, 1.0);
  for (int64_t i = 0; i < 50000; ++i) ASSERT_EQ(tail[i], whole[50000 + i]);
}

TEST(CpuRandom, NormalStatistics) {
  const int64_t n = 1'000'000;
  for (double mean : {0.0, 3.0}) {
    auto x = draw<double>(OpKind::Normal, n, 1234, 0, mean, 2.0);
    double s = 0, s2 = 0;
    for (double v : x) s += v, s2 += v * v;
    const double m = s / n, sd = std::sqrt(s2 / n - m * m);
    EXPECT_NEAR(m, mean, 0.01);
    EXPECT_NEAR(sd, 2.0, 0.01);
  }
}

TEST(CpuRandom, UniformRangeAndMean) {
  auto x = draw<float>(OpKind::Uniform, 1'000'000, 9, 0, -2.0, 3.0);
  double s = 0;
  for (float v : x) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    s += v;
  }
  EXPECT_NEAR(s / x.size(), 0.5, 0.01);
  auto h = draw<Half>(OpKind::Uniform, 1000, 9, 0, 0.0, 1.0);
  for (int i = 0; i < 1000; ++i) ASSERT_NEAR(static_cast<float>(h[i]), x[i] / 5.0f + 0.4f, 1e-3);
}

TEST(CpuRandom, IndependentOfOutputStrides) {
  // A 300x200 output written through a transposed view gets the same value per
  // row-major position as a contiguous one.
  const int64_t r = 300, c = 200;
  std::vector<float> dense(r * c), transposed(r * c);
  KernelCall k = call(OpKind::Normal, {arg(dense, {r, c})}, {}, 0.0, 1.0);
  k.seed = 11;
  run(k);
  k.outputs = {arg(transposed, {r, c}, {1, r})};
  run(k);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(transposed[j * r + i], dense[i * c + j]);
  }
}

TEST(CpuRandom, IntegerOutputsAreRejected) {
  std::vector<int32_t> out(4);
  EXPECT_THROW(run(call(OpKind::Normal, {arg(out, {4})}, {}, 0.0, 1.0)), TypeError);
}

TEST(CpuArange, RealDtypes) {
  EXPECT_EQ(draw<int64_t>(OpKind::Arange, 4, 0, 0, 3, -2), (std::vector<int64_t>{3, 1, -1, -3}));
  EXPECT_EQ(draw<float>(OpKind::Arange, 3, 0, 0, 0.5, 0.25), (std::vector<float>{0.5f, 0.75f, 1.0f}));
  auto big = draw<double>(OpKind::Arange, 100000, 0, 0, 0.0, 0.1);
  EXPECT_DOUBLE_EQ(big[99999], 99999 * 0.1);
  auto h = draw<BFloat16>(OpKind::Arange, 3, 0, 0, 1, 1);
  EXPECT_EQ(static_cast<float>(h[2]), 3.0f);
  auto u = draw<uint8_t>(OpKind::Arange, 3, 0, 0, 250, 3);
  EXPECT_EQ(u, (std::vector<uint8_t>{250, 253, 0}));
}

}  // namespace
}  // namespace ember::test
