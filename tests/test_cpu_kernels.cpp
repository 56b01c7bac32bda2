// Element-wise kernels, Copy, Fill and IndexSelect of the host executor, driven
// through cpu::run over std::vector buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu_kernel_test_util.h"
#include "ember/errors.h"

namespace ember::test {
namespace {

using c64 = std::complex<float>;

template <typename T>
std::vector<T> binary(OpKind op, std::vector<T> a, std::vector<T> b, Scalar s0 = 1) {
  std::vector<T> out(a.size());
  const int64_t n = static_cast<int64_t>(a.size());
  run(call(op, {arg(out, {n})}, {arg(a, {n}), arg(b, {n})}, s0));
  return out;
}

template <typename T>
std::vector<T> unary(OpKind op, std::vector<T> a, Scalar s0 = 0) {
  std::vector<T> out(a.size());
  const int64_t n = static_cast<int64_t>(a.size());
  run(call(op, {arg(out, {n})}, {arg(a, {n})}, s0));
  return out;
}

TEST(CpuElementwise, ArithmeticFloat) {
  EXPECT_EQ(binary<float>(OpKind::Add, {1, 2, 3}, {10, 20, 30}, 2), (std::vector<float>{21, 42, 63}));
  EXPECT_EQ(binary<float>(OpKind::Sub, {1, 2, 3}, {10, 20, 30}, 1), (std::vector<float>{-9, -18, -27}));
  EXPECT_EQ(binary<double>(OpKind::Mul, {1.5, 2, 3}, {2, 4, -1}), (std::vector<double>{3, 8, -3}));
  EXPECT_EQ(binary<double>(OpKind::Div, {1, 2, 3}, {4, 0, -2}),
            (std::vector<double>{0.25, std::numeric_limits<double>::infinity(), -1.5}));
  EXPECT_EQ(binary<float>(OpKind::Pow, {2, 9, 4}, {3, 0.5f, -1}), (std::vector<float>{8, 3, 0.25f}));
}

TEST(CpuElementwise, LongBlockAndTailMatchScalarLoop) {
  // 1000 elements cover full 64-element blocks, a tail and the parallel path boundary.
  const int64_t n = 1000;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = 0.5f * static_cast<float>(i), b[i] = static_cast<float>(n - i);
  auto out = binary<float>(OpKind::Add, a, b, 3);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + 3 * b[i]) << i;
}

TEST(CpuElementwise, Integers) {
  EXPECT_EQ(binary<int64_t>(OpKind::Add, {1, 2}, {3, 4}, 3), (std::vector<int64_t>{10, 14}));
  EXPECT_EQ(binary<int32_t>(OpKind::Div, {7, -7, 9}, {2, 2, -3}), (std::vector<int32_t>{3, -3, -3}));
  EXPECT_EQ(binary<int64_t>(OpKind::Pow, {2, 3, 2, -1, 1, 0}, {10, 3, -1, -3, -5, 0}),
            (std::vector<int64_t>{1024, 27, 0, -1, 1, 1}));
  EXPECT_EQ(binary<int8_t>(OpKind::Mul, {100, -128}, {3, 1}), (std::vector<int8_t>{44, -128}));  // wraps
  // INT_MIN / -1 wraps instead of trapping.
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(binary<int64_t>(OpKind::Div, {lowest}, {-1}), (std::vector<int64_t>{lowest}));
  EXPECT_EQ(unary<int64_t>(OpKind::Neg, {lowest, 5}), (std::vector<int64_t>{lowest, -5}));
  EXPECT_EQ(unary<int32_t>(OpKind::Abs, {-3, 4}), (std::vector<int32_t>{3, 4}));
}

TEST(CpuElementwise, IntegerDivisionByZeroRaises) {
  std::vector<int64_t> a{1, 2, 3}, b{1, 0, 1}, out{7, 7, 7};
  try {
    run(call(OpKind::Div, {arg(out, {3})}, {arg(a, {3}), arg(b, {3})}));
    FAIL() << "expected ZeroDivisionError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "ZeroDivisionError");
  }
  EXPECT_EQ(out, (std::vector<int64_t>{7, 7, 7}));  // nothing written
  EXPECT_THROW(run(call(OpKind::RDivScalar, {arg(out, {3})}, {arg(b, {3})}, 4)), ValueError);
}

TEST(CpuElementwise, HalfAndBFloat16ComputeInFloat) {
  std::vector<Half> a{Half(1.5f), Half(-2.0f), Half(1000.0f)}, b{Half(0.25f), Half(3.0f), Half(0.5f)};
  auto out = binary<Half>(OpKind::Add, a, b, 2);
  EXPECT_EQ(static_cast<float>(out[0]), 2.0f);
  EXPECT_EQ(static_cast<float>(out[1]), 4.0f);
  EXPECT_EQ(static_cast<float>(out[2]), 1001.0f);
  std::vector<BFloat16> x{BFloat16(4.0f), BFloat16(0.0f)};
  auto s = unary<BFloat16>(OpKind::Sqrt, x);
  EXPECT_EQ(static_cast<float>(s[0]), 2.0f);
  EXPECT_EQ(static_cast<float>(s[1]), 0.0f);
  auto e = unary<Half>(OpKind::Exp, {Half(0.0f), Half(1.0f)});
  EXPECT_EQ(static_cast<float>(e[0]), 1.0f);
  EXPECT_NEAR(static_cast<float>(e[1]), 2.71828f, 2e-3);
}

TEST(CpuElementwise, Complex) {
  auto m = binary<c64>(OpKind::Mul, {c64(1, 2), c64(0, 1)}, {c64(3, -1), c64(0, 1)});
  EXPECT_EQ(m[0], c64(5, 5));
  EXPECT_EQ(m[1], c64(-1, 0));
  auto ex = unary<c64>(OpKind::Exp, {c64(0, static_cast<float>(M_PI))});
  EXPECT_NEAR(ex[0].real(), -1.0f, 1e-6);
  EXPECT_NEAR(ex[0].imag(), 0.0f, 1e-6);
  // abs of complex64 is float32.
  std::vector<c64> z{c64(3, 4), c64(-5, 12)};
  std::vector<float> mag(2);
  run(call(OpKind::Abs, {arg(mag, {2})}, {arg(z, {2})}));
  EXPECT_EQ(mag, (std::vector<float>{5, 13}));
  // Ordering comparisons do not exist for complex.
  std::vector<uint8_t> out(2);
  try {
    run(call(OpKind::Lt, {bool_arg(out, {2})}, {arg(z, {2}), arg(z, {2})}));
    FAIL();
  } catch (const TypeError& e) {
    EXPECT_STREQ(e.what(), "\"lt\" not implemented for 'ComplexFloat'");
  }
}

TEST(CpuElementwise, UnaryFloat) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = unary<float>(OpKind::Relu, {-1, 0, 2, nan});
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[2], 2);
  EXPECT_TRUE(std::isnan(r[3]));  // relu propagates NaN
  EXPECT_EQ(unary<float>(OpKind::Neg, {1, -2}), (std::vector<float>{-1, 2}));
  EXPECT_EQ(unary<float>(OpKind::Abs, {-1.5f, 2}), (std::vector<float>{1.5f, 2}));
  auto l = unary<double>(OpKind::Log, {1, std::exp(2.0), 0});
  EXPECT_DOUBLE_EQ(l[1], 2.0);
  EXPECT_EQ(l[2], -std::numeric_limits<double>::infinity());
  auto sg = unary<double>(OpKind::Sigmoid, {0, 100, -100});
  EXPECT_DOUBLE_EQ(sg[0], 0.5);
  EXPECT_NEAR(sg[1], 1.0, 1e-12);
  EXPECT_NEAR(sg[2], 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(unary<double>(OpKind::Tanh, {0.5})[0], std::tanh(0.5));
  EXPECT_TRUE(std::isnan(unary<float>(OpKind::Sqrt, {-1})[0]));
}

TEST(CpuElementwise, UnsupportedDtypesRaiseTypeError) {
  std::vector<int64_t> a{1}, out{0};
  try {
    run(call(OpKind::Exp, {arg(out, {1})}, {arg(a, {1})}));
    FAIL();
  } catch (const TypeError& e) {
    EXPECT_STREQ(e.what(), "\"exp\" not implemented for 'Long'");
  }
  std::vector<uint8_t> b{1}, bo{0};
  EXPECT_THROW(run(call(OpKind::Neg, {bool_arg(bo, {1})}, {bool_arg(b, {1})})), TypeError);
  EXPECT_THROW(run(call(OpKind::Sub, {bool_arg(bo, {1})}, {bool_arg(b, {1}), bool_arg(b, {1})})), TypeError);
}

TEST(CpuElementwise, ScalarForms) {
  EXPECT_EQ(unary<float>(OpKind::AddScalar, {1, 2}, 0.5), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(unary<float>(OpKind::MulScalar, {1, 2}, -2), (std::vector<float>{-2, -4}));
  EXPECT_EQ(unary<float>(OpKind::PowScalar, {3, 4}, 2), (std::vector<float>{9, 16}));
  EXPECT_EQ(unary<int64_t>(OpKind::PowScalar, {3, -2}, 3), (std::vector<int64_t>{27, -8}));
  try {
    unary<int32_t>(OpKind::PowScalar, {2}, -1);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "Integers to negative integer powers are not allowed.");
  }
  EXPECT_EQ(unary<float>(OpKind::RSubScalar, {1, 2}, 10), (std::vector<float>{9, 8}));
  EXPECT_EQ(unary<float>(OpKind::RDivScalar, {4, 0.5f}, 2), (std::vector<float>{0.5f, 4}));
  EXPECT_EQ(unary<int32_t>(OpKind::RDivScalar, {4, -3}, 12), (std::vector<int32_t>{3, -4}));
}

TEST(CpuElementwise, ComparisonsWriteBool) {
  std::vector<float> a{1, 2, 3}, b{2, 2, 2};
  std::vector<uint8_t> out(3);
  auto cmp = [&](OpKind op) {
    run(call(op, {bool_arg(out, {3})}, {arg(a, {3}), arg(b, {3})}));
    return out;
  };
  EXPECT_EQ(cmp(OpKind::Eq), (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(cmp(OpKind::Ne), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(cmp(OpKind::Lt), (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(cmp(OpKind::Le), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(cmp(OpKind::Gt), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(cmp(OpKind::Ge), (std::vector<uint8_t>{0, 1, 1}));
  std::vector<int16_t> x{-1, 5}, y{-1, 4};
  run(call(OpKind::Gt, {bool_arg(out, {2})}, {arg(x, {2}), arg(y, {2})}));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 1);
}

TEST(CpuElementwise, IsClose) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> a{1.0, 1.0, nan, inf, 100.0}, b{1.0 + 1e-9, 1.1, nan, inf, 101.0};
  std::vector<uint8_t> out(5);
  KernelCall c = call(OpKind::IsClose, {bool_arg(out, {5})}, {arg(a, {5}), arg(b, {5})}, 1e-8, 1e-5);
  run(c);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 0, 0, 1, 0}));
  c.args = detail::kargs::IsClose{1e-8, 0.01, /*equal_nan=*/true};  // rtol: |100 - 101| <= 0.01 * 101
  run(c);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 0, 1, 1, 1}));
}

TEST(CpuElementwise, BroadcastThroughZeroStrides) {
  // a: 2x3, b: a row of 3 broadcast over rows, c: a column of 2 broadcast over columns.
  std::vector<float> a{1, 2, 3, 4, 5, 6}, row{10, 20, 30}, col{100, 200}, out(6);
  run(call(OpKind::Add, {arg(out, {2, 3})}, {arg(a, {2, 3}), arg(row, {2, 3}, {0, 1})}, 1));
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  run(call(OpKind::Mul, {arg(out, {2, 3})}, {arg(col, {2, 3}, {1, 0}), arg(row, {2, 3}, {0, 1})}));
  EXPECT_EQ(out, (std::vector<float>{1000, 2000, 3000, 2000, 4000, 6000}));
  // A scalar broadcast over a large tensor (the parallel path).
  const int64_t n = 100000;
  std::vector<float> big(n, 2.0f), one{3.0f}, res(n);
  run(call(OpKind::Sub, {arg(res, {n})}, {arg(big, {n}), arg(one, {n}, {0})}, 1));
  for (float v : res) ASSERT_EQ(v, -1.0f);
}

TEST(CpuElementwise, NonContiguousOperands) {
  // a is the transpose of a 3x2 buffer; out is written with a column stride of 2.
  std::vector<double> base{1, 2, 3, 4, 5, 6};  // [[1,2],[3,4],[5,6]]
  std::vector<double> ones(6, 1.0), out(12, -1.0);
  run(call(OpKind::Add, {arg(out, {2, 3}, {6, 2})}, {arg(base, {2, 3}, {1, 2}), arg(ones, {2, 3})}, 10));
  // a^T = [[1,3,5],[2,4,6]]
  EXPECT_EQ(out, (std::vector<double>{11, -1, 13, -1, 15, -1, 12, -1, 14, -1, 16, -1}));
  // In-place on a strided view.
  std::vector<int32_t> buf{1, 2, 3, 4, 5, 6, 7, 8};
  run(call(OpKind::MulScalar, {arg(buf, {4}, {2})}, {arg(buf, {4}, {2})}, 3));
  EXPECT_EQ(buf, (std::vector<int32_t>{3, 2, 9, 4, 15, 6, 21, 8}));
}

TEST(CpuCopy, ConvertsBetweenDtypes) {
  std::vector<float> f{1.9f, -1.9f, 0.0f, 300.0f};
  std::vector<int32_t> i(4);
  run(call(OpKind::Copy, {arg(i, {4})}, {arg(f, {4})}));
  EXPECT_EQ(i, (std::vector<int32_t>{1, -1, 0, 300}));  // truncates
  std::vector<uint8_t> u(4);
  run(call(OpKind::Copy, {arg(u, {4})}, {arg(f, {4})}));
  EXPECT_EQ(u, (std::vector<uint8_t>{1, 255, 0, 44}));  // through int64, wrapping
  std::vector<uint8_t> bits(4);
  run(call(OpKind::Copy, {bool_arg(bits, {4})}, {arg(f, {4})}));
  EXPECT_EQ(bits, (std::vector<uint8_t>{1, 1, 0, 1}));  // != 0
  std::vector<c64> z{c64(2.5f, 7), c64(-1, 0)};
  std::vector<double> d(2);
  run(call(OpKind::Copy, {arg(d, {2})}, {arg(z, {2})}));
  EXPECT_EQ(d, (std::vector<double>{2.5, -1}));  // real part
  std::vector<int64_t> l{3, -4};
  std::vector<std::complex<double>> zd(2);
  run(call(OpKind::Copy, {arg(zd, {2})}, {arg(l, {2})}));
  EXPECT_EQ(zd[1], std::complex<double>(-4, 0));
  // float -> half -> bfloat16 rounding: 1 + 2^-9 is exact in half, rounds to 1 in bfloat16.
  std::vector<float> src{1.0f + 1.0f / 512, 65520.0f};
  std::vector<Half> h(2);
  std::vector<BFloat16> bf(2);
  run(call(OpKind::Copy, {arg(h, {2})}, {arg(src, {2})}));
  EXPECT_EQ(static_cast<float>(h[0]), 1.0f + 1.0f / 512);
  EXPECT_TRUE(std::isinf(static_cast<float>(h[1])));
  run(call(OpKind::Copy, {arg(bf, {2})}, {arg(h, {2})}));
  EXPECT_EQ(static_cast<float>(bf[0]), 1.0f);
}

TEST(CpuCopy, StridedSameDtypeAndLarge) {
  // Transpose a 300x200 matrix (goes through the pool).
  const int64_t r = 300, c = 200;
  std::vector<int16_t> src(r * c), dst(r * c);
  for (int64_t k = 0; k < r * c; ++k) src[k] = static_cast<int16_t>(k % 30000);
  run(call(OpKind::Copy, {arg(dst, {c, r})}, {arg(src, {c, r}, {1, c})}));
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t j = 0; j < r; ++j) ASSERT_EQ(dst[i * r + j], src[j * c + i]);
  }
}

TEST(CpuFill, EveryDtype) {
  std::vector<int8_t> i8(5);
  run(call(OpKind::Fill, {arg(i8, {5})}, {}, -3));
  EXPECT_EQ(i8, std::vector<int8_t>(5, -3));
  std::vector<Half> h(3);
  run(call(OpKind::Fill, {arg(h, {3})}, {}, 0.5));
  for (Half v : h) EXPECT_EQ(static_cast<float>(v), 0.5f);
  std::vector<c64> z(2);
  run(call(OpKind::Fill, {arg(z, {2})}, {}, std::complex<double>(1, -1)));
  EXPECT_EQ(z[1], c64(1, -1));
  std::vector<uint8_t> b(3);
  run(call(OpKind::Fill, {bool_arg(b, {3})}, {}, true));
  EXPECT_EQ(b, std::vector<uint8_t>(3, 1));
  std::vector<double> strided(6, 0);
  run(call(OpKind::Fill, {arg(strided, {3}, {2})}, {}, 7));
  EXPECT_EQ(strided, (std::vector<double>{7, 0, 7, 0, 7, 0}));
}

TEST(CpuIndexSelect, SelectsAlongDims) {
  std::vector<float> in{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // 3x4
  std::vector<int64_t> idx{2, 0, 2};
  std::vector<float> rows(12);
  KernelCall c = call(OpKind::IndexSelect, {arg(rows, {3, 4})}, {arg(in, {3, 4}), arg(idx, {3})});
  c.args = detail::kargs::Dim{0};
  run(c);
  EXPECT_EQ(rows, (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  std::vector<int32_t> idx32{3, 1};
  std::vector<float> cols(6);
  c = call(OpKind::IndexSelect, {arg(cols, {3, 2})}, {arg(in, {3, 4}), arg(idx32, {2})});
  c.args = detail::kargs::Dim{1};
  run(c);
  EXPECT_EQ(cols, (std::vector<float>{3, 1, 7, 5, 11, 9}));
  // Transposed input (4x3 view) and a strided index.
  std::vector<int64_t> sparse_idx{1, -9, 0};
  std::vector<float> t(6);
  c = call(OpKind::IndexSelect, {arg(t, {2, 3})}, {arg(in, {4, 3}, {1, 4}), arg(sparse_idx, {2}, {2})});
  c.args = detail::kargs::Dim{0};
  run(c);
  EXPECT_EQ(t, (std::vector<float>{1, 5, 9, 0, 4, 8}));
}

TEST(CpuIndexSelect, OutOfRangeRaisesAndWritesNothing) {
  std::vector<double> in{1, 2, 3};
  std::vector<double> out{-1, -1};
  for (int64_t bad : {3, -1}) {
    std::vector<int64_t> idx{0, bad};
    KernelCall c = call(OpKind::IndexSelect, {arg(out, {2})}, {arg(in, {3}), arg(idx, {2})});
    c.args = detail::kargs::Dim{0};
    try {
      run(c);
      FAIL() << "index " << bad;
    } catch (const IndexError& e) {
      EXPECT_STREQ(e.what(), "index out of range in self");
    }
    EXPECT_EQ(out, (std::vector<double>{-1, -1}));
  }
}

}  // namespace
}  // namespace ember::test
