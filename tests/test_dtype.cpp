// DType properties, torch.promote_types, torch.result_type, Scalar::dtype and
// the internal assert.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/type_promotion.h"
#include "ember/dtype.h"
#include "ember/errors.h"
#include "ember/half.h"
#include "ember/scalar.h"

namespace ember {
namespace {

using detail::Operand;
using detail::result_type;

constexpr DType b1 = kBool, u1 = kUInt8, i1 = kInt8, i2 = kInt16, i4 = kInt32, i8 = kInt64, f2 = kFloat16,
                bf = kBFloat16, f4 = kFloat32, f8 = kFloat64, c4 = kComplex64, c8 = kComplex128;
constexpr DType kAll[kNumDTypes] = {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8};

std::string str(DType dtype) {
  std::ostringstream out;
  out << dtype;
  return out.str();
}

// Half's conversions (branch-free, include/ember/half.h): every float16 value widens to the
// float IEEE 754 gives it (computed here from its fields) and narrows back to the same bits;
// float -> float16 rounds as PyTorch's .half() does (the table: PyTorch 1.13,
// /usr/bin/python3, torch.tensor(v, dtype=torch.float32).half().view(torch.int16)).
TEST(Half, ConversionsMatchIeeeAndPyTorch) {
  int wrong = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const float got = Half::to_float(static_cast<uint16_t>(h));
    if (exponent == 31 && mantissa != 0) {
      if (!std::isnan(got) && wrong++ < 5) ADD_FAILURE() << std::hex << "0x" << h << " should be NaN";
      continue;
    }
    const double want = exponent == 31  ? sign * INFINITY
                        : exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                        : sign * std::ldexp(1024.0 + mantissa, static_cast<int>(exponent) - 25);
    const bool same =
        static_cast<double>(got) == want && std::signbit(got) == std::signbit(want) && Half::from_float(got) == h;
    if (!same && wrong++ < 5) ADD_FAILURE() << std::hex << "0x" << h << ": " << got << " vs " << want;
  }
  EXPECT_EQ(wrong, 0);
  const std::vector<std::pair<float, uint16_t>> torch_half = {{0.0f, 0x0000},
                                                              {-0.0f, 0x8000},
                                                              {1.0f, 0x3c00},
                                                              {65504.0f, 0x7bff},
                                                              {65519.99f, 0x7bff},
                                                              {65520.0f, 0x7c00},
                                                              {-65520.0f, 0xfc00},
                                                              {1e-08f, 0x0000},
                                                              {2.98023224e-08f, 0x0},
                                                              {2.98023259e-08f, 0x1},
                                                              {5.96046448e-08f, 0x1},
                                                              {8.94069672e-08f, 0x2},
                                                              {6.09755516e-05f, 0x3ff},
                                                              {6.10351562e-05f, 0x400},
                                                              {1.0009765625f, 0x3c01},
                                                              {1.00048828125f, 0x3c00},
                                                              {1.00146484375f, 0x3c02},
                                                              {INFINITY, 0x7c00},
                                                              {-INFINITY, 0xfc00},
                                                              {NAN, 0x7e00},
                                                              {3.40282347e+38f, 0x7c00},
                                                              {1e-45f, 0x0000}};
  for (const auto& [value, bits] : torch_half) EXPECT_EQ(Half::from_float(value), bits) << value;
}

TEST(DType, ElementSizeMatchesCppType) {
  EXPECT_EQ(element_size(kBool), sizeof(dtype_t<DType::Bool>));
  EXPECT_EQ(element_size(kUInt8), 1u);
  EXPECT_EQ(element_size(kInt16), 2u);
  EXPECT_EQ(element_size(kInt32), 4u);
  EXPECT_EQ(element_size(kInt64), 8u);
  EXPECT_EQ(element_size(kFloat16), sizeof(Half));
  EXPECT_EQ(element_size(kBFloat16), sizeof(BFloat16));
  EXPECT_EQ(element_size(kFloat32), 4u);
  EXPECT_EQ(element_size(kFloat64), 8u);
  EXPECT_EQ(element_size(kComplex64), sizeof(std::complex<float>));
  EXPECT_EQ(element_size(kComplex128), 16u);
}

TEST(DType, NamesAndPrinting) {
  EXPECT_STREQ(dtype_name(kFloat32), "float32");
  EXPECT_STREQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(kUInt8), "uint8");
  EXPECT_EQ(str(kFloat32), "torch.float32");
  EXPECT_EQ(str(kInt64), "torch.int64");
  EXPECT_EQ(str(kBool), "torch.bool");
  EXPECT_EQ(str(kComplex128), "torch.complex128");
  EXPECT_EQ(str(kHalf), "torch.float16");
}

TEST(DType, Predicates) {
  for (DType d : kAll) {
    int categories = is_floating_point(d) + is_complex(d) + is_integral(d, /*include_bool=*/true);
    EXPECT_EQ(categories, 1) << d;  // every dtype is in exactly one category
  }
  EXPECT_TRUE(is_floating_point(kBFloat16));
  EXPECT_FALSE(is_floating_point(kComplex64));
  EXPECT_TRUE(is_complex(kComplex128));
  EXPECT_TRUE(is_integral(kUInt8));
  EXPECT_FALSE(is_integral(kBool));
  EXPECT_TRUE(is_integral(kBool, true));
  EXPECT_FALSE(is_integral(kFloat16, true));
}

TEST(DType, RealAndComplexCounterparts) {
  EXPECT_EQ(to_real(kComplex64), kFloat32);
  EXPECT_EQ(to_real(kComplex128), kFloat64);
  EXPECT_EQ(to_real(kInt32), kInt32);
  EXPECT_EQ(to_complex(kFloat32), kComplex64);
  EXPECT_EQ(to_complex(kFloat64), kComplex128);
  EXPECT_EQ(to_complex(kComplex64), kComplex64);
  EXPECT_THROW(to_complex(kInt64), TypeError);
  EXPECT_THROW(to_complex(kFloat16), TypeError);  // no complex32 in ember
  EXPECT_EQ(default_dtype(), kFloat32);
}

// PyTorch's whole table (torch.promote_types for every pair, as libtorch
// returns it); rows and columns in DType order.
TEST(DType, PromoteTypesMatchesPyTorchTable) {
  const DType expected[kNumDTypes][kNumDTypes] = {
      {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8}, {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8}, {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8, c4, c8}, {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8, c4, c8},
      {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, c4, c8}, {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, c4, c8},
      {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, c4, c8}, {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, c8, c8},
      {c4, c4, c4, c4, c4, c4, c4, c4, c4, c8, c4, c8}, {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8},
  };
  for (int a = 0; a < kNumDTypes; ++a) {
    for (int b = 0; b < kNumDTypes; ++b) {
      EXPECT_EQ(promote_types(kAll[a], kAll[b]), expected[a][b]) << kAll[a] << " with " << kAll[b];
    }
  }
}

TEST(DType, ScalarDtype) {
  EXPECT_EQ(Scalar(true).dtype(), kBool);
  EXPECT_EQ(Scalar(3).dtype(), kInt64);
  EXPECT_EQ(Scalar(uint8_t{3}).dtype(), kInt64);
  EXPECT_EQ(Scalar(2.5).dtype(), kFloat32);
  EXPECT_EQ(Scalar(2.5f).dtype(), kFloat32);
  EXPECT_EQ(Scalar(std::complex<double>(1, 2)).dtype(), kComplex64);
  EXPECT_EQ(Scalar().dtype(), kInt64);
}

Operand tensor(DType d) { return Operand::tensor(d, 1); }
Operand zero_dim(DType d) { return Operand::tensor(d, 0); }
Operand scalar(const Scalar& s) { return Operand::scalar(s); }

TEST(ResultType, TensorsPromoteAsTypes) {
  EXPECT_EQ(result_type({tensor(i4), tensor(f2)}), f2);
  EXPECT_EQ(result_type({tensor(u1), tensor(i1)}), i2);
  EXPECT_EQ(result_type({tensor(f2), tensor(bf)}), f4);
  EXPECT_EQ(result_type({tensor(c4), tensor(f8)}), c8);
  EXPECT_EQ(result_type({tensor(i8), tensor(i8), tensor(b1)}), i8);
  EXPECT_EQ(result_type({zero_dim(i4), zero_dim(f8)}), f8);
}

TEST(ResultType, ScalarsOnlyMatterAcrossCategories) {
  EXPECT_EQ(result_type({tensor(i4), scalar(5)}), i4);  // int32 + 5 stays int32
  EXPECT_EQ(result_type({tensor(u1), scalar(-1)}), u1);
  EXPECT_EQ(result_type({tensor(b1), scalar(1)}), i8);  // bool + int -> int64
  EXPECT_EQ(result_type({tensor(b1), scalar(true)}), b1);
  EXPECT_EQ(result_type({tensor(i4), scalar(2.5)}), f4);  // float scalar -> default dtype
  EXPECT_EQ(result_type({tensor(u1), scalar(2.5)}), f4);
  EXPECT_EQ(result_type({tensor(f2), scalar(2.5)}), f2);  // same category keeps the tensor's
  EXPECT_EQ(result_type({tensor(bf), scalar(1e300)}), bf);
  EXPECT_EQ(result_type({tensor(f8), scalar(2.5)}), f8);
  EXPECT_EQ(result_type({tensor(f4), scalar(std::complex<double>(0, 1))}), c4);
  EXPECT_EQ(result_type({tensor(f8), scalar(std::complex<double>(0, 1))}), c8);
  EXPECT_EQ(result_type({tensor(i8), scalar(std::complex<double>(0, 1))}), c4);
  EXPECT_EQ(result_type({tensor(c8), scalar(std::complex<double>(0, 1))}), c8);
  EXPECT_EQ(result_type({scalar(1), scalar(2.5)}), f4);
  EXPECT_EQ(result_type({scalar(true), scalar(2)}), i8);
}

TEST(ResultType, ZeroDimTensorsRankBetweenTensorsAndScalars) {
  EXPECT_EQ(result_type({tensor(i4), zero_dim(i8)}), i4);
  EXPECT_EQ(result_type({tensor(f2), zero_dim(f8)}), f2);
  // A zero-dim tensor of a higher category keeps its own precision, unlike a scalar.
  EXPECT_EQ(result_type({tensor(i4), zero_dim(f8)}), f8);
  EXPECT_EQ(result_type({tensor(i8), zero_dim(c8)}), c8);
  EXPECT_EQ(result_type({tensor(f4), zero_dim(c8)}), c4);
  EXPECT_EQ(result_type({zero_dim(i4), scalar(7)}), i4);
  EXPECT_EQ(result_type({zero_dim(f2), scalar(2.5)}), f2);
  EXPECT_EQ(result_type({zero_dim(i4), scalar(2.5)}), f4);
  EXPECT_EQ(result_type({tensor(u1), zero_dim(i4), scalar(2.5)}), f4);
  EXPECT_EQ(result_type({tensor(f8), zero_dim(c4)}), c8);
}

TEST(ResultType, IncrementalStateMatchesOneShot) {
  detail::ResultTypeState state;
  state.update(tensor(i2));
  state.update(scalar(3));
  EXPECT_EQ(state.result(), i2);
  state.update(zero_dim(f8));
  EXPECT_EQ(state.result(), f8);
}

TEST(ResultType, NoOperandsIsAnError) { EXPECT_THROW(result_type(std::span<const Operand>()), ValueError); }

TEST(Errors, InternalAssertNamesTheSite) {
  try {
    EMBER_ASSERT(1 + 1 == 3);
    FAIL() << "EMBER_ASSERT did not throw";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("Internal assert failed at ", 0), 0u) << message;
    EXPECT_NE(message.find("test_dtype.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("1 + 1 == 3"), std::string::npos) << message;
    EXPECT_NE(message.find("please report a bug to ember"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ember
