// Batched matmul on the host: layouts, broadcasting, integer/half loops, TF32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu_kernel_test_util.h"
#include "ember/errors.h"

namespace ember::test {
namespace {

KernelCall matmul(TensorArg out, TensorArg a, TensorArg b, bool tf32 = false) {
  KernelCall c = call(OpKind::Matmul, {std::move(out)}, {std::move(a), std::move(b)});
  c.args = detail::kargs::Matmul{tf32, 0};
  return c;
}

TEST(CpuMatmul, SmallProductsInEveryLayout) {
  std::vector<float> a{1, 2, 3, 4, 5, 6};     // 2x3
  std::vector<float> b{7, 8, 9, 10, 11, 12};  // 3x2
  const std::vector<float> expect{58, 64, 139, 154};
  std::vector<float> out(4);
  run(matmul(arg(out, {1, 2, 2}), arg(a, {1, 2, 3}), arg(b, {1, 3, 2})));
  EXPECT_EQ(out, expect);
  // a given as the transpose of a 3x2 buffer, b as the transpose of a 2x3 buffer.
  std::vector<float> at{1, 4, 2, 5, 3, 6}, bt{7, 9, 11, 8, 10, 12};
  run(matmul(arg(out, {1, 2, 2}), arg(at, {1, 2, 3}, {6, 1, 2}), arg(bt, {1, 3, 2}, {6, 1, 3})));
  EXPECT_EQ(out, expect);
  // A column-major (transposed) output, then an output with a column stride of 2.
  std::vector<float> outt(4);
  run(matmul(arg(outt, {1, 2, 2}, {4, 1, 2}), arg(a, {1, 2, 3}), arg(b, {1, 3, 2})));
  EXPECT_EQ(outt, (std::vector<float>{58, 139, 64, 154}));
  std::vector<float> wide(8, -1);
  run(matmul(arg(wide, {1, 2, 2}, {8, 4, 2}), arg(a, {1, 2, 3}), arg(b, {1, 3, 2})));
  EXPECT_EQ(wide, (std::vector<float>{58, -1, 64, -1, 139, -1, 154, -1}));
  // An operand BLAS cannot read in place (every other column of a 2x6 buffer).
  std::vector<double> sparse{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}, bd{7, 8, 9, 10, 11, 12}, outd(4);
  run(matmul(arg(outd, {1, 2, 2}), arg(sparse, {1, 2, 3}, {12, 6, 2}), arg(bd, {1, 3, 2})));
  EXPECT_EQ(outd, (std::vector<double>{58, 64, 139, 154}));
}

TEST(CpuMatmul, BatchBroadcastAndComplex) {
  // Batch of 3 left operands times one shared right operand (batch stride 0).
  std::vector<double> a{1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0};  // three 2x2
  std::vector<double> b{1, 2, 3, 4};
  std::vector<double> out(12);
  run(matmul(arg(out, {3, 2, 2}), arg(a, {3, 2, 2}), arg(b, {3, 2, 2}, {0, 2, 1})));
  EXPECT_EQ(out, (std::vector<double>{1, 2, 3, 4, 2, 4, 6, 8, 3, 4, 1, 2}));
  using c64 = std::complex<float>;
  std::vector<c64> za{c64(0, 1), c64(1, 0)}, zb{c64(0, 1), c64(2, 0)}, zo(1);
  run(matmul(arg(zo, {1, 1, 1}), arg(za, {1, 1, 2}), arg(zb, {1, 2, 1})));
  EXPECT_EQ(zo[0], c64(1, 0));  // i*i + 1*2
}

TEST(CpuMatmul, IntegersAndHalfUseTheLoop) {
  std::vector<int64_t> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12}, out(4);
  run(matmul(arg(out, {1, 2, 2}), arg(a, {1, 2, 3}), arg(b, {1, 3, 2})));
  EXPECT_EQ(out, (std::vector<int64_t>{58, 64, 139, 154}));
  std::vector<int8_t> a8{100, 100}, b8{2, 1}, o8(1);
  run(matmul(arg(o8, {1, 1, 1}), arg(a8, {1, 1, 2}), arg(b8, {1, 2, 1})));
  EXPECT_EQ(o8[0], static_cast<int8_t>(300 - 256));  // wraps like int8 arithmetic
  std::vector<Half> ha, hb, ho(4);
  for (float v : {1, 2, 3, 4, 5, 6}) ha.push_back(Half(v));
  for (float v : {7, 8, 9, 10, 11, 12}) hb.push_back(Half(v));
  run(matmul(arg(ho, {1, 2, 2}), arg(ha, {1, 2, 3}), arg(hb, {1, 3, 2}, {6, 1, 3})));
  // hb read as the transpose of its buffer: [[7,10],[8,11],[9,12]]
  EXPECT_EQ(static_cast<float>(ho[0]), 1 * 7 + 2 * 8 + 3 * 9.0f);
  EXPECT_EQ(static_cast<float>(ho[3]), 4 * 10 + 5 * 11 + 6 * 12.0f);
  std::vector<uint8_t> bools(1);
  EXPECT_THROW(run(matmul(bool_arg(bools, {1, 1, 1}), bool_arg(bools, {1, 1, 1}), bool_arg(bools, {1, 1, 1}))),
               TypeError);
}

TEST(CpuMatmul, EmptyInnerDimGivesZeros) {
  std::vector<float> a, b, out(4, 9.0f);
  run(matmul(arg(out, {1, 2, 2}), arg(a, {1, 2, 0}), arg(b, {1, 0, 2})));
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));
}

TEST(CpuMatmul, ShapeMismatchRaises) {
  std::vector<float> a(6), b(6), out(4);
  EXPECT_THROW(run(matmul(arg(out, {1, 2, 2}), arg(a, {1, 2, 3}), arg(b, {1, 2, 3}))), ValueError);
}

// Max relative error of a 256x256 float32 product against a double reference.
double relative_error(bool tf32) {
  const int64_t n = 256;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(n * n), b(n * n), out(n * n);
  for (float& v : a) v = dist(gen);
  for (float& v : b) v = dist(gen);
  run(matmul(arg(out, {1, n, n}), arg(a, {1, n, n}), arg(b, {1, n, n}), tf32));
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < n; ++k) ref += static_cast<double>(a[i * n + k]) * b[k * n + j];
      num += (out[i * n + j] - ref) * (out[i * n + j] - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

TEST(CpuMatmul, Tf32RoundingIsObservable) {
  const double full = relative_error(false), tf32 = relative_error(true);
  EXPECT_LT(full, 1e-5);
  EXPECT_GT(tf32, 1e-4);
  EXPECT_LT(tf32, 1e-2);
}

}  // namespace
}  // namespace ember::test
