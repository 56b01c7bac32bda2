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

// A float16 product widens its operands to float and narrows the float sums back (the host's
// branch-free conversions): times a 1x1 identity, every float16 value comes back as it was
// (NaNs as NaNs), read row-major and as a transposed (column-major) operand.
TEST(CpuMatmul, Float16ProductsKeepEveryFloat16Value) {
  std::vector<Half> values(65536), one{Half(1.0f)}, out(65536);
  for (uint32_t i = 0; i < 65536; ++i) values[i].bits = static_cast<uint16_t>(i);
  for (bool column_major : {false, true}) {
    // values as a {65536, 1} left operand (row-major), or as a {1, 65536} right operand stored
    // column by column.
    if (!column_major) {
      run(matmul(arg(out, {1, 65536, 1}), arg(values, {1, 65536, 1}), arg(one, {1, 1, 1})));
    } else {
      run(matmul(arg(out, {1, 1, 65536}), arg(one, {1, 1, 1}), arg(values, {1, 1, 65536}, {65536, 1, 1})));
    }
    int wrong = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const bool nan = ((i >> 10) & 0x1f) == 0x1f && (i & 0x3ff) != 0;
      const bool same = nan ? (((out[i].bits >> 10) & 0x1f) == 0x1f && (out[i].bits & 0x3ff) != 0)
                            : out[i].bits == values[i].bits || (i & 0x7fff) == 0;  // -0 * 1 may give +0
      if (!same && wrong++ < 5) ADD_FAILURE() << std::hex << "float16 0x" << i << " came back as 0x" << out[i].bits;
    }
    EXPECT_EQ(wrong, 0) << (column_major ? "column-major" : "row-major");
  }
}

// With TF32 both operands round to 10 mantissa bits before the product, whatever their layout:
// k + 2^-12 rounds to k for k in 1..8 (a quarter of an ulp or less), so the TF32 product of
// such values is the product of the integers, exact in float32; without TF32 the fractions
// show. Covers row-major, transposed and unreadable operands, a broadcast batch, and an
// output BLAS cannot write in place.
TEST(CpuMatmul, Tf32RoundsBothOperandsInEveryLayout) {
  const float e = std::ldexp(1.0f, -12);
  // Batch 3 of 2x3 left operands, integers 1..6 plus 2^-12, stored row-major.
  std::vector<float> a(18), a_int(18);
  for (int i = 0; i < 18; ++i) {
    a_int[i] = static_cast<float>(i % 6 + 1) + static_cast<float>(i / 6);  // 1..6, 2..7, 3..8
    a[i] = a_int[i] + e;
  }
  // One 3x2 right operand shared by the batch (batch stride 0): 1..6 plus 2^-12.
  std::vector<float> b{1 + e, 2 + e, 3 + e, 4 + e, 5 + e, 6 + e}, b_int{1, 2, 3, 4, 5, 6};
  auto expected = [&](int64_t item, int64_t r, int64_t c) {
    float sum = 0;
    for (int64_t k = 0; k < 3; ++k) sum += a_int[item * 6 + r * 3 + k] * b_int[k * 2 + c];
    return sum;
  };
  auto check = [&](const std::vector<float>& out, const IntList& strides, const char* layout) {
    for (int64_t item = 0; item < 3; ++item) {
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t c = 0; c < 2; ++c) {
          EXPECT_EQ(out[item * strides[0] + r * strides[1] + c * strides[2]], expected(item, r, c))
              << layout << ": item " << item << " (" << r << ", " << c << ")";
        }
      }
    }
  };
  std::vector<float> out(12);
  run(matmul(arg(out, {3, 2, 2}), arg(a, {3, 2, 3}), arg(b, {3, 3, 2}, {0, 2, 1}), /*tf32=*/true));
  check(out, {4, 2, 1}, "row-major");
  // The shared operand's rows padded to 4 (a leading dimension that its dense copy does not have).
  std::vector<float> b_padded(12, 1000.0f);
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t c = 0; c < 2; ++c) b_padded[k * 4 + c] = b[k * 2 + c];
  }
  run(matmul(arg(out, {3, 2, 2}), arg(a, {3, 2, 3}), arg(b_padded, {3, 3, 2}, {0, 4, 1}), true));
  check(out, {4, 2, 1}, "row-major, padded rows");
  // Without TF32 the fractions stay: (1 + e)(1 + e) + (2 + e)(3 + e) + (3 + e)(5 + e) > 22.
  std::vector<float> full(12);
  run(matmul(arg(full, {3, 2, 2}), arg(a, {3, 2, 3}), arg(b, {3, 3, 2}, {0, 2, 1}), /*tf32=*/false));
  EXPECT_GT(full[0], 22.0f);

  // Both operands transposed (column-major), the output column-major.
  std::vector<float> at(18), bt(6);
  for (int64_t item = 0; item < 3; ++item) {
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t k = 0; k < 3; ++k) at[item * 6 + k * 2 + r] = a[item * 6 + r * 3 + k];
    }
  }
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t c = 0; c < 2; ++c) bt[c * 3 + k] = b[k * 2 + c];
  }
  std::vector<float> outt(12);
  run(matmul(arg(outt, {3, 2, 2}, {4, 1, 2}), arg(at, {3, 2, 3}, {6, 1, 2}), arg(bt, {3, 3, 2}, {0, 1, 3}), true));
  check(outt, {4, 1, 2}, "column-major");

  // The left operand every other column of a wider buffer (BLAS cannot read it), the output
  // with a column stride of 2.
  std::vector<float> sparse(36, -100.0f);
  for (int64_t i = 0; i < 18; ++i) sparse[2 * i] = a[i];
  std::vector<float> wide(24, -1.0f);
  run(matmul(arg(wide, {3, 2, 2}, {8, 4, 2}), arg(sparse, {3, 2, 3}, {12, 6, 2}), arg(b, {3, 3, 2}, {0, 2, 1}), true));
  check(wide, {8, 4, 2}, "strided");
  EXPECT_EQ(wide[1], -1.0f);  // the gaps untouched
}

}  // namespace
}  // namespace ember::test
