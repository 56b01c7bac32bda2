// Reductions of the host executor: every kind, dims, keepdim, strides, accuracy, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu_kernel_test_util.h"
#include "ember/errors.h"

namespace ember::test {
namespace {

template <typename Out, typename In>
std::vector<Out> reduce(OpKind op, std::vector<In>& in, IntList sizes, int64_t dim, IntList out_sizes,
                        IntList in_strides = {}) {
  int64_t n = 1;
  for (int64_t s : out_sizes) n *= s;
  std::vector<Out> out(static_cast<size_t>(n), Out(-7));
  KernelCall c = call(op, {arg(out, out_sizes)}, {arg(in, sizes, in_strides)});
  c.args = detail::kargs::Dim{dim};
  run(c);
  return out;
}

TEST(CpuReduce, SumOverEachDim) {
  std::vector<float> x{1, 2, 3, 4, 5, 6};  // 2x3
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, x, {2, 3}, 0, {3})), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, x, {2, 3}, 1, {2})), (std::vector<float>{6, 15}));
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, x, {2, 3}, -1, {})), (std::vector<float>{21}));
  // keepdim: out is 2x1 / 1x3.
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, x, {2, 3}, 1, {2, 1})), (std::vector<float>{6, 15}));
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, x, {2, 3}, 0, {1, 3})), (std::vector<float>{5, 7, 9}));
}

// kargs::Dim::more: further dims reduced in the same pass, keepdim or squeezed output, any strides.
TEST(CpuReduce, SeveralDimsInOnePass) {
  std::vector<float> x(24);  // 2x3x4, x[i][j][k] = 12i + 4j + k
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto over = [&](int64_t dim, uint64_t more, IntList out_sizes, IntList sizes = {2, 3, 4}, IntList strides = {}) {
    int64_t n = 1;
    for (int64_t s : out_sizes) n *= s;
    std::vector<float> out(static_cast<size_t>(n), -7.0f);
    KernelCall c = call(OpKind::Sum, {arg(out, out_sizes)}, {arg(x, sizes, strides)});
    c.args = detail::kargs::Dim{dim, more};
    run(c);
    return out;
  };
  // Dims 0 and 2: sum_{i,k} = 2 * (4 * 4j + 6) + 4 * 12 = 32j + 60.
  EXPECT_EQ(over(0, 1u << 2, {3}), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(over(0, 1u << 2, {1, 3, 1}), (std::vector<float>{60, 92, 124}));
  // Dims 1 and 2 (one dense run per output).
  EXPECT_EQ(over(1, 1u << 2, {2}), (std::vector<float>{66, 210}));
  // A transposed view {4, 3, 2} of the same data, dims 0 and 2: the j sums again.
  EXPECT_EQ(over(0, 1u << 2, {3}, {4, 3, 2}, {1, 4, 12}), (std::vector<float>{60, 92, 124}));
  // A mask past the last dim is refused.
  EXPECT_THROW(over(0, 1u << 3, {3}), IndexError);
}

TEST(CpuReduce, IntegerAndBoolSumsToInt64) {
  std::vector<int8_t> x{100, 100, 100, -1};
  EXPECT_EQ((reduce<int64_t, int8_t>(OpKind::Sum, x, {4}, -1, {})), (std::vector<int64_t>{299}));
  std::vector<uint8_t> b{1, 0, 1, 1, 1, 0};
  std::vector<int64_t> out(2);
  TensorArg in = bool_arg(b, {2, 3});
  KernelCall c = call(OpKind::Sum, {arg(out, {2})}, {in});
  c.args = detail::kargs::Dim{1};
  run(c);
  EXPECT_EQ(out, (std::vector<int64_t>{2, 2}));
}

TEST(CpuReduce, MeanMaxMinAll) {
  std::vector<double> x{1, 5, 3, -2, 8, 0};  // 2x3
  EXPECT_EQ((reduce<double, double>(OpKind::Mean, x, {2, 3}, 1, {2})), (std::vector<double>{3, 2}));
  EXPECT_EQ((reduce<double, double>(OpKind::Max, x, {2, 3}, 0, {3})), (std::vector<double>{1, 8, 3}));
  EXPECT_EQ((reduce<double, double>(OpKind::Min, x, {2, 3}, -1, {})), (std::vector<double>{-2}));
  std::vector<int32_t> xi{4, -9, 7};
  EXPECT_EQ((reduce<int32_t, int32_t>(OpKind::Max, xi, {3}, -1, {})), (std::vector<int32_t>{7}));
  EXPECT_EQ((reduce<int32_t, int32_t>(OpKind::Min, xi, {3}, 0, {})), (std::vector<int32_t>{-9}));
  std::vector<uint8_t> all_out(2);
  KernelCall c = call(OpKind::All, {bool_arg(all_out, {2})}, {arg(x, {2, 3})});
  c.args = detail::kargs::Dim{1};
  run(c);
  EXPECT_EQ(all_out, (std::vector<uint8_t>{1, 0}));  // the second row holds a 0
  std::vector<Half> h{Half(1.0f), Half(2.0f), Half(4.0f)};
  auto hm = reduce<Half, Half>(OpKind::Mean, h, {3}, -1, {});
  EXPECT_NEAR(static_cast<float>(hm[0]), 7.0f / 3, 1e-3);
}

TEST(CpuReduce, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(1000, 1.0f);
  x[500] = nan;
  x[10] = 5.0f;
  EXPECT_TRUE(std::isnan((reduce<float, float>(OpKind::Max, x, {1000}, -1, {}))[0]));
  EXPECT_TRUE(std::isnan((reduce<float, float>(OpKind::Min, x, {1000}, 0, {}))[0]));
  // Column path: NaN only in column 1.
  std::vector<float> m{1, nan, 3, 4, 2, 6};  // 3x2, reduce dim 0
  auto cols = reduce<float, float>(OpKind::Max, m, {3, 2}, 0, {2});
  EXPECT_EQ(cols[0], 3);
  EXPECT_TRUE(std::isnan(cols[1]));
}

// Few outputs over many rows: the columns path cuts the rows into chunks of 1024 whose partial
// results combine in order ({5000, 3} and a strided {3000, 2} view over dim 0): sums as exact
// as a double reference allows, means, a NaN in one column, and All over bools.
TEST(CpuReduce, ColumnsOverManyRowsInChunks) {
  std::vector<float> x(15000);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  std::vector<double> expected(3, 0.0);
  for (size_t i = 0; i < x.size(); ++i) expected[i % 3] += x[i];
  const auto sums = reduce<float, float>(OpKind::Sum, x, {5000, 3}, 0, {3});
  const auto means = reduce<float, float>(OpKind::Mean, x, {5000, 3}, 0, {1, 3});
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(sums[c], expected[c], 1e-5 * (1 + std::abs(expected[c]))) << c;
    EXPECT_NEAR(means[c], expected[c] / 5000, 1e-7) << c;
  }
  // Every other row and the first two columns of each: a strided input.
  std::vector<double> strided(2, 0.0);
  for (int64_t r = 0; r < 5000; r += 2) strided[0] += x[r * 3], strided[1] += x[r * 3 + 1];
  const auto picked = reduce<float, float>(OpKind::Sum, x, {2500, 2}, 0, {2}, {6, 1});
  EXPECT_NEAR(picked[0], strided[0], 1e-5 * (1 + std::abs(strided[0])));
  EXPECT_NEAR(picked[1], strided[1], 1e-5 * (1 + std::abs(strided[1])));
  x[4000 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 4000: the fourth chunk
  const auto maxima = reduce<float, float>(OpKind::Max, x, {5000, 3}, 0, {3});
  EXPECT_FALSE(std::isnan(maxima[0]));
  EXPECT_TRUE(std::isnan(maxima[1]));
  std::vector<uint8_t> flags(6000, 1), all_out(2);
  flags[4001] = 0;  // column 1 of row 2000
  KernelCall c = call(OpKind::All, {bool_arg(all_out, {2})}, {bool_arg(flags, {3000, 2})});
  c.args = detail::kargs::Dim{0};
  run(c);
  EXPECT_EQ(all_out, (std::vector<uint8_t>{1, 0}));
}

TEST(CpuReduce, EmptyReductions) {
  std::vector<float> none;
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, none, {0}, -1, {})), (std::vector<float>{0}));
  EXPECT_TRUE(std::isnan((reduce<float, float>(OpKind::Mean, none, {0}, -1, {}))[0]));
  std::vector<uint8_t> out(3);
  KernelCall c = call(OpKind::All, {bool_arg(out, {3})}, {arg(none, {3, 0})});
  c.args = detail::kargs::Dim{1};
  run(c);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 1, 1}));
}

TEST(CpuReduce, Float32SumOfTenMillionOnesIsExact) {
  std::vector<float> ones(10'000'000, 1.0f);
  EXPECT_EQ((reduce<float, float>(OpKind::Sum, ones, {10'000'000}, -1, {}))[0], 1e7f);
  // Down the columns (the outer dim of a contiguous matrix) too.
  auto cols = reduce<float, float>(OpKind::Sum, ones, {5'000'000, 2}, 0, {2});
  EXPECT_EQ(cols, (std::vector<float>{5e6f, 5e6f}));
}

TEST(CpuReduce, MatchesDoubleReferenceForEveryLayout) {
  const int64_t rows = 1500, cols = 70;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = dist(gen);
  std::vector<double> row_ref(rows, 0), col_ref(cols, 0);
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      row_ref[i] += x[i * cols + j];
      col_ref[j] += x[i * cols + j];
      total += x[i * cols + j];
    }
  }
  auto r = reduce<double, float>(OpKind::Sum, x, {rows, cols}, 1, {rows});
  auto c = reduce<double, float>(OpKind::Sum, x, {rows, cols}, 0, {cols});
  for (int64_t i = 0; i < rows; ++i) ASSERT_NEAR(r[i], row_ref[i], 1e-4);
  for (int64_t j = 0; j < cols; ++j) ASSERT_NEAR(c[j], col_ref[j], 1e-4);
  // The transposed view (cols x rows, strides {1, cols}) reduced along each dim.
  auto tr = reduce<double, float>(OpKind::Sum, x, {cols, rows}, 1, {cols}, {1, cols});
  auto tc = reduce<double, float>(OpKind::Sum, x, {cols, rows}, 0, {rows}, {1, cols});
  for (int64_t j = 0; j < cols; ++j) ASSERT_NEAR(tr[j], col_ref[j], 1e-4);
  for (int64_t i = 0; i < rows; ++i) ASSERT_NEAR(tc[i], row_ref[i], 1e-4);
  EXPECT_NEAR((reduce<double, float>(OpKind::Sum, x, {cols, rows}, -1, {}, {1, cols}))[0], total, 1e-3);
  // A 3-D tensor reduced over its middle dim, written into a strided output.
  std::vector<float> out(2 * 10 * 2, -1.0f);
  KernelCall call3 = call(OpKind::Mean, {arg(out, {2, 10}, {20, 2})}, {arg(x, {2, 35, 10}, {1050, 10, 1})});
  call3.args = detail::kargs::Dim{1};
  run(call3);
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 10; ++b) {
      double ref = 0;
      for (int64_t k = 0; k < 35; ++k) ref += x[a * 1050 + k * 10 + b];
      ASSERT_NEAR(out[a * 20 + b * 2], ref / 35, 1e-5);
      ASSERT_EQ(out[a * 20 + b * 2 + 1], -1.0f);
    }
  }
}

TEST(CpuReduce, WideColumnBlocks) {
  // 130 rows x 5000 columns reduced over rows: full 256-column steps, a tail, several
  // lane widenings (every 64 rows) and, with 2+ threads, several column blocks.
  const int64_t rows = 130, cols = 5000;
  std::vector<Half> x(rows * cols);
  std::vector<uint8_t> flags(rows * cols, 1);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) x[i * cols + j] = Half(static_cast<float>((i + j) % 7));
  }
  flags[77 * cols + 4321] = 0;
  auto sums = reduce<float, Half>(OpKind::Sum, x, {rows, cols}, 0, {cols});
  std::vector<uint8_t> all(cols);
  KernelCall c = call(OpKind::All, {bool_arg(all, {cols})}, {bool_arg(flags, {rows, cols})});
  c.args = detail::kargs::Dim{0};
  run(c);
  for (int64_t j = 0; j < cols; ++j) {
    double ref = 0;
    for (int64_t i = 0; i < rows; ++i) ref += (i + j) % 7;
    ASSERT_EQ(sums[j], ref) << j;
    ASSERT_EQ(all[j], j == 4321 ? 0 : 1) << j;
  }
}

TEST(CpuReduce, ComplexSumAndUnsupported) {
  std::vector<std::complex<float>> z{{1, 2}, {3, -1}};
  auto s = reduce<std::complex<float>, std::complex<float>>(OpKind::Sum, z, {2}, -1, {});
  EXPECT_EQ(s[0], std::complex<float>(4, 1));
  std::vector<std::complex<float>> out(1);
  KernelCall c = call(OpKind::Max, {arg(out, {})}, {arg(z, {2})});
  EXPECT_THROW(run(c), TypeError);
}

}  // namespace
}  // namespace ember::test
