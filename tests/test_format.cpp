// The tensor repr against strings derived from torch/_tensor_str.py's
// algorithm (default print options), one case per rule it has.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <vector>

#include "core/format.h"
#include "ember/errors.h"
#include "ember/half.h"

namespace ember {
namespace {

using IntList = std::vector<int64_t>;
using Values = std::vector<std::complex<double>>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
void append(std::vector<char>& bytes, T value) {
  const char* p = reinterpret_cast<const char*>(&value);
  bytes.insert(bytes.end(), p, p + sizeof(T));
}

// Host bytes of `values` stored as `dtype` (the real part for real dtypes).
std::vector<char> encode(DType dtype, const Values& values) {
  std::vector<char> bytes;
  for (auto v : values) {
    double re = v.real();
    switch (dtype) {
      case kBool: append<uint8_t>(bytes, re != 0); break;
      case kUInt8: append(bytes, static_cast<uint8_t>(re)); break;
      case kInt8: append(bytes, static_cast<int8_t>(re)); break;
      case kInt16: append(bytes, static_cast<int16_t>(re)); break;
      case kInt32: append(bytes, static_cast<int32_t>(re)); break;
      case kInt64: append(bytes, static_cast<int64_t>(re)); break;
      case kFloat16: append(bytes, Half(static_cast<float>(re))); break;
      case kBFloat16: append(bytes, BFloat16(static_cast<float>(re))); break;
      case kFloat32: append(bytes, static_cast<float>(re)); break;
      case kFloat64: append(bytes, re); break;
      case kComplex64: append(bytes, std::complex<float>(v)); break;
      case kComplex128: append(bytes, v); break;
    }
  }
  return bytes;
}

std::string repr(DType dtype, const IntList& sizes, const Values& values, Device device = kCPU,
                 const IntList& strides = {}) {
  std::vector<char> bytes = encode(dtype, values);
  return detail::format_tensor(bytes.data(), dtype, sizes, strides, device);
}

Values arange(int64_t n, double step = 1.0) {
  Values values;
  for (int64_t i = 0; i < n; ++i) values.emplace_back(static_cast<double>(i) * step);
  return values;
}

TEST(Format, SpecExamples) {
  EXPECT_EQ(repr(kFloat32, {3, 2}, Values(6, 0.3)),
            "tensor([[0.3000, 0.3000],\n"
            "        [0.3000, 0.3000],\n"
            "        [0.3000, 0.3000]])");
  EXPECT_EQ(repr(kFloat32, {3, 2}, Values(6, -5.0), "cuda:0"),
            "tensor([[-5., -5.],\n"
            "        [-5., -5.],\n"
            "        [-5., -5.]], device='cuda:0')");
  EXPECT_EQ(repr(kInt64, {1, 3}, {1, 2, 3}), "tensor([[1, 2, 3]])");
  EXPECT_EQ(repr(kFloat32, {2}, {1., 2.}, "cuda:0"), "tensor([1., 2.], device='cuda:0')");
}

TEST(Format, CommonWidthPadding) {
  EXPECT_EQ(repr(kFloat32, {3}, {1.5, -10.25, 100.125}), "tensor([  1.5000, -10.2500, 100.1250])");
  EXPECT_EQ(repr(kInt64, {3}, {-1, 20, -300}), "tensor([  -1,   20, -300])");
  EXPECT_EQ(repr(kBool, {3}, {1, 0, 1}), "tensor([ True, False,  True])");
}

TEST(Format, ScientificNotation) {
  EXPECT_EQ(repr(kFloat32, {2}, {1e-5, 1.0}), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(repr(kFloat32, {2}, {1e9, 1.0}), "tensor([1.0000e+09, 1.0000e+00])");
  EXPECT_EQ(repr(kFloat32, {2}, {5e-5, 6e-5}), "tensor([5.0000e-05, 6.0000e-05])");
  EXPECT_EQ(repr(kFloat32, {2}, {1.0, 2000.0}), "tensor([1.0000e+00, 2.0000e+03])");
}

TEST(Format, NonFiniteAndZeros) {
  EXPECT_EQ(repr(kFloat32, {4}, {1.5, kNan, kInf, -kInf}), "tensor([1.5000,    nan,    inf,   -inf])");
  EXPECT_EQ(repr(kFloat32, {3}, {1.0, kNan, -100.0}), "tensor([   1.,   nan, -100.])");
  EXPECT_EQ(repr(kFloat32, {2}, {0.0, 0.0}), "tensor([0., 0.])");
  EXPECT_EQ(repr(kFloat32, {1}, {kNan}), "tensor([nan])");
  EXPECT_EQ(repr(kFloat32, {1}, {-kNan}), "tensor([nan])");  // Python never prints "-nan"
  EXPECT_EQ(repr(kFloat32, {2}, {-0.0, 1.5}), "tensor([-0.0000, 1.5000])");
}

TEST(Format, Complex) {
  EXPECT_EQ(repr(kComplex64, {2}, {{1, 2}, {-3.5, -0.5}}), "tensor([ 1.0000+2.0000j, -3.5000-0.5000j])");
  EXPECT_EQ(repr(kComplex128, {}, {{1, 2}}), "tensor(1.+2.j, dtype=torch.complex128)");
  Values values;
  for (int i = 0; i < 8; ++i) values.emplace_back(i, (0 - i) * 0.5);  // +0.0 at i = 0
  // The sign of a negative zero imaginary part doubles as the separator.
  EXPECT_EQ(repr(kComplex64, {2}, {{1, -0.0}, {2.5, 1}}), "tensor([1.0000-0.j, 2.5000+1.j])");
  EXPECT_EQ(repr(kComplex64, {8}, values),
            "tensor([0.+0.0000j, 1.-0.5000j, 2.-1.0000j, 3.-1.5000j, 4.-2.0000j, 5.-2.5000j,\n"
            "        6.-3.0000j, 7.-3.5000j])");
}

TEST(Format, DtypeSuffix) {
  EXPECT_EQ(repr(kFloat64, {2}, {1.0, 2.5}), "tensor([1.0000, 2.5000], dtype=torch.float64)");
  EXPECT_EQ(repr(kFloat16, {2}, {0.1, 2.0}), "tensor([0.1000, 2.0000], dtype=torch.float16)");
  EXPECT_EQ(repr(kBFloat16, {2}, {0.1, 2.0}, "cuda:1"),
            "tensor([0.1001, 2.0000], device='cuda:1', dtype=torch.bfloat16)");
  EXPECT_EQ(repr(kUInt8, {3}, {0, 7, 255}), "tensor([  0,   7, 255], dtype=torch.uint8)");
}

TEST(Format, ZeroDim) {
  EXPECT_EQ(repr(kFloat32, {}, {3.0}), "tensor(3.)");
  EXPECT_EQ(repr(kInt64, {}, {7}), "tensor(7)");
  EXPECT_EQ(repr(kBool, {}, {1}, "cuda:0"), "tensor(True, device='cuda:0')");
  EXPECT_EQ(repr(kFloat64, {}, {0.125}), "tensor(0.1250, dtype=torch.float64)");
}

TEST(Format, Empty) {
  EXPECT_EQ(repr(kFloat32, {0}, {}), "tensor([])");
  EXPECT_EQ(repr(kFloat32, {0, 3}, {}), "tensor([], size=(0, 3))");
  EXPECT_EQ(repr(kInt64, {0}, {}), "tensor([], dtype=torch.int64)");
  EXPECT_EQ(repr(kInt32, {2, 0}, {}, "cuda:1"), "tensor([], device='cuda:1', size=(2, 0), dtype=torch.int32)");
}

TEST(Format, NestedBrackets) {
  EXPECT_EQ(repr(kFloat32, {2, 2, 3}, arange(12)),
            "tensor([[[ 0.,  1.,  2.],\n"
            "         [ 3.,  4.,  5.]],\n"
            "\n"
            "        [[ 6.,  7.,  8.],\n"
            "         [ 9., 10., 11.]]])");
  EXPECT_EQ(repr(kInt64, {2, 1, 2, 2}, arange(8)),
            "tensor([[[[0, 1],\n"
            "          [2, 3]]],\n"
            "\n"
            "\n"
            "        [[[4, 5],\n"
            "          [6, 7]]]])");
}

TEST(Format, LineWrapping) {
  EXPECT_EQ(repr(kFloat32, {30}, arange(30, 1.5)),
            "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
            "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
            "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
            "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])");
  EXPECT_EQ(repr(kInt64, {40}, arange(40)),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
            "        36, 37, 38, 39])");
  EXPECT_EQ(repr(kFloat64, {9}, arange(9, 1.25), "cuda:0"),
            "tensor([ 0.0000,  1.2500,  2.5000,  3.7500,  5.0000,  6.2500,  7.5000,  8.7500,\n"
            "        10.0000], device='cuda:0', dtype=torch.float64)");
}

TEST(Format, Summarized) {
  EXPECT_EQ(repr(kFloat32, {2000}, arange(2000)),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(repr(kInt64, {40, 50}, arange(2000)),
            "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
            "        [  50,   51,   52,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
            "        ...,\n"
            "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
            "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
            "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])");
  EXPECT_EQ(repr(kFloat64, {10, 10, 20}, arange(2000, 0.125)),
            "tensor([[[0.0000e+00, 1.2500e-01, 2.5000e-01,  ..., 2.1250e+00,\n"
            "          2.2500e+00, 2.3750e+00],\n"
            "         [2.5000e+00, 2.6250e+00, 2.7500e+00,  ..., 4.6250e+00,\n"
            "          4.7500e+00, 4.8750e+00],\n"
            "         [5.0000e+00, 5.1250e+00, 5.2500e+00,  ..., 7.1250e+00,\n"
            "          7.2500e+00, 7.3750e+00],\n"
            "         ...,\n"
            "         [1.7500e+01, 1.7625e+01, 1.7750e+01,  ..., 1.9625e+01,\n"
            "          1.9750e+01, 1.9875e+01],\n"
            "         [2.0000e+01, 2.0125e+01, 2.0250e+01,  ..., 2.2125e+01,\n"
            "          2.2250e+01, 2.2375e+01],\n"
            "         [2.2500e+01, 2.2625e+01, 2.2750e+01,  ..., 2.4625e+01,\n"
            "          2.4750e+01, 2.4875e+01]],\n"
            "\n"
            "        [[2.5000e+01, 2.5125e+01, 2.5250e+01,  ..., 2.7125e+01,\n"
            "          2.7250e+01, 2.7375e+01],\n"
            "         [2.7500e+01, 2.7625e+01, 2.7750e+01,  ..., 2.9625e+01,\n"
            "          2.9750e+01, 2.9875e+01],\n"
            "         [3.0000e+01, 3.0125e+01, 3.0250e+01,  ..., 3.2125e+01,\n"
            "          3.2250e+01, 3.2375e+01],\n"
            "         ...,\n"
            "         [4.2500e+01, 4.2625e+01, 4.2750e+01,  ..., 4.4625e+01,\n"
            "          4.4750e+01, 4.4875e+01],\n"
            "         [4.5000e+01, 4.5125e+01, 4.5250e+01,  ..., 4.7125e+01,\n"
            "          4.7250e+01, 4.7375e+01],\n"
            "         [4.7500e+01, 4.7625e+01, 4.7750e+01,  ..., 4.9625e+01,\n"
            "          4.9750e+01, 4.9875e+01]],\n"
            "\n"
            "        [[5.0000e+01, 5.0125e+01, 5.0250e+01,  ..., 5.2125e+01,\n"
            "          5.2250e+01, 5.2375e+01],\n"
            "         [5.2500e+01, 5.2625e+01, 5.2750e+01,  ..., 5.4625e+01,\n"
            "          5.4750e+01, 5.4875e+01],\n"
            "         [5.5000e+01, 5.5125e+01, 5.5250e+01,  ..., 5.7125e+01,\n"
            "          5.7250e+01, 5.7375e+01],\n"
            "         ...,\n"
            "         [6.7500e+01, 6.7625e+01, 6.7750e+01,  ..., 6.9625e+01,\n"
            "          6.9750e+01, 6.9875e+01],\n"
            "         [7.0000e+01, 7.0125e+01, 7.0250e+01,  ..., 7.2125e+01,\n"
            "          7.2250e+01, 7.2375e+01],\n"
            "         [7.2500e+01, 7.2625e+01, 7.2750e+01,  ..., 7.4625e+01,\n"
            "          7.4750e+01, 7.4875e+01]],\n"
            "\n"
            "        ...,\n"
            "\n"
            "        [[1.7500e+02, 1.7512e+02, 1.7525e+02,  ..., 1.7712e+02,\n"
            "          1.7725e+02, 1.7738e+02],\n"
            "         [1.7750e+02, 1.7762e+02, 1.7775e+02,  ..., 1.7962e+02,\n"
            "          1.7975e+02, 1.7988e+02],\n"
            "         [1.8000e+02, 1.8012e+02, 1.8025e+02,  ..., 1.8212e+02,\n"
            "          1.8225e+02, 1.8238e+02],\n"
            "         ...,\n"
            "         [1.9250e+02, 1.9262e+02, 1.9275e+02,  ..., 1.9462e+02,\n"
            "          1.9475e+02, 1.9488e+02],\n"
            "         [1.9500e+02, 1.9512e+02, 1.9525e+02,  ..., 1.9712e+02,\n"
            "          1.9725e+02, 1.9738e+02],\n"
            "         [1.9750e+02, 1.9762e+02, 1.9775e+02,  ..., 1.9962e+02,\n"
            "          1.9975e+02, 1.9988e+02]],\n"
            "\n"
            "        [[2.0000e+02, 2.0012e+02, 2.0025e+02,  ..., 2.0212e+02,\n"
            "          2.0225e+02, 2.0238e+02],\n"
            "         [2.0250e+02, 2.0262e+02, 2.0275e+02,  ..., 2.0462e+02,\n"
            "          2.0475e+02, 2.0488e+02],\n"
            "         [2.0500e+02, 2.0512e+02, 2.0525e+02,  ..., 2.0712e+02,\n"
            "          2.0725e+02, 2.0738e+02],\n"
            "         ...,\n"
            "         [2.1750e+02, 2.1762e+02, 2.1775e+02,  ..., 2.1962e+02,\n"
            "          2.1975e+02, 2.1988e+02],\n"
            "         [2.2000e+02, 2.2012e+02, 2.2025e+02,  ..., 2.2212e+02,\n"
            "          2.2225e+02, 2.2238e+02],\n"
            "         [2.2250e+02, 2.2262e+02, 2.2275e+02,  ..., 2.2462e+02,\n"
            "          2.2475e+02, 2.2488e+02]],\n"
            "\n"
            "        [[2.2500e+02, 2.2512e+02, 2.2525e+02,  ..., 2.2712e+02,\n"
            "          2.2725e+02, 2.2738e+02],\n"
            "         [2.2750e+02, 2.2762e+02, 2.2775e+02,  ..., 2.2962e+02,\n"
            "          2.2975e+02, 2.2988e+02],\n"
            "         [2.3000e+02, 2.3012e+02, 2.3025e+02,  ..., 2.3212e+02,\n"
            "          2.3225e+02, 2.3238e+02],\n"
            "         ...,\n"
            "         [2.4250e+02, 2.4262e+02, 2.4275e+02,  ..., 2.4462e+02,\n"
            "          2.4475e+02, 2.4488e+02],\n"
            "         [2.4500e+02, 2.4512e+02, 2.4525e+02,  ..., 2.4712e+02,\n"
            "          2.4725e+02, 2.4738e+02],\n"
            "         [2.4750e+02, 2.4762e+02, 2.4775e+02,  ..., 2.4962e+02,\n"
            "          2.4975e+02, 2.4988e+02]]], dtype=torch.float64)");
  Values values;
  for (int i = 0; i < 2002; ++i) values.emplace_back(i % 7);
  EXPECT_EQ(repr(kFloat32, {2, 1001}, values),
            "tensor([[0., 1., 2.,  ..., 4., 5., 6.],\n"
            "        [0., 1., 2.,  ..., 4., 5., 6.]])");
  // Exactly at the threshold nothing is elided.
  EXPECT_EQ(repr(kInt64, {1000}, arange(1000)).find("..."), std::string::npos);
}

TEST(Format, SummaryWidthIgnoresHiddenValues) {
  // The formatter only looks at the edge items shown, so the huge hidden
  // middle value neither widens the columns nor switches to scientific.
  Values values = arange(2000);
  for (auto& v : values) v = 1.0;
  values[1000] = 1e12;
  EXPECT_EQ(repr(kFloat32, {2000}, values), "tensor([1., 1., 1.,  ..., 1., 1., 1.])");
}

TEST(Format, FollowsStrides) {
  // The transpose of [[1, 2, 3], [4, 5, 6]]: sizes {3, 2}, strides {1, 3}.
  EXPECT_EQ(repr(kInt64, {3, 2}, {1, 2, 3, 4, 5, 6}, kCPU, {1, 3}),
            "tensor([[1, 4],\n        [2, 5],\n        [3, 6]])");
  // A broadcast (stride 0) row.
  EXPECT_EQ(repr(kInt64, {2, 3}, {7, 8, 9}, kCPU, {0, 1}), "tensor([[7, 8, 9],\n        [7, 8, 9]])");
}

TEST(Format, HugeSummarisedDimensionReadsOnlyEdges) {
  // 10^10 elements broadcast from one value: printing touches only the edges.
  EXPECT_EQ(repr(kFloat32, {100000, 100000}, {2.5}, kCPU, {0, 0}),
            "tensor([[2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000],\n"
            "        [2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000],\n"
            "        [2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000],\n"
            "        ...,\n"
            "        [2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000],\n"
            "        [2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000],\n"
            "        [2.5000, 2.5000, 2.5000,  ..., 2.5000, 2.5000, 2.5000]])");
}

TEST(Format, RejectsMismatchedStrides) {
  std::vector<char> bytes = encode(kInt64, {1, 2});
  EXPECT_THROW(detail::format_tensor(bytes.data(), kInt64, {2}, {1, 1}, kCPU), ValueError);
}

}  // namespace
}  // namespace ember
