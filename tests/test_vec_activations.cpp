// The cpu's vectorisable float sigmoid and tanh (backends/cpu/cpu_vec_activations.h), which the
// fused recurrent cells' float rows use, against the float64 std:: functions rounded to float:
// the largest error in ulp (counted across the denormals too) over a sweep of the whole float
// range, and the special values exactly; and the cpu's float sigmoid and tanh ops, which use them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_vec_activations.h"
#include "ember/ember.h"

namespace ember::detail::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

double sigmoid_reference(float x) { return 1.0 / (1.0 + std::exp(-static_cast<double>(x))); }
double tanh_reference(float x) { return std::tanh(static_cast<double>(x)); }

// Floats in order as integers: the distance between two is their difference in ulp, zero
// and the denormals included.
int64_t ordered(float x) {
  const auto bits = static_cast<int64_t>(std::bit_cast<int32_t>(x));
  return bits < 0 ? std::numeric_limits<int32_t>::min() - bits : bits;
}
int64_t ulp_distance(float a, float b) { return std::llabs(ordered(a) - ordered(b)); }

// Every 997th float bit pattern (both signs, the denormals included; NaNs skipped), a dense
// sweep of [-20, 20] where the cells' gates live, and the cut points of the approximations.
template <typename F>
void for_each_sample(F&& visit) {
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 997) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!std::isnan(x)) visit(x);
  }
  for (float x = -20.0f; x <= 20.0f; x += 1.0f / 4096) visit(x);
  for (float cut : {0.625f, 52.0f, 87.33654f, 88.72283f, 103.97f, 104.0f}) {
    for (float x : {cut, std::nextafter(cut, 0.0f), std::nextafter(cut, kInf)}) {
      visit(x);
      visit(-x);
    }
  }
}

template <typename Fn, typename Ref>
int64_t max_ulp_error(Fn fn, Ref reference, float* worst) {
  int64_t max_error = 0;
  for_each_sample([&](float x) {
    const int64_t error = ulp_distance(fn(x), static_cast<float>(reference(x)));
    if (error > max_error) {
      max_error = error;
      *worst = x;
    }
  });
  return max_error;
}

TEST(VecActivations, SigmoidIsWithinThreeUlpOfStdAcrossTheFloatRange) {
  float worst = 0;
  const int64_t error = max_ulp_error(vec_sigmoid, sigmoid_reference, &worst);
  EXPECT_LE(error, 3) << "at x = " << worst;
}

TEST(VecActivations, TanhIsWithinThreeUlpOfStdAcrossTheFloatRange) {
  float worst = 0;
  const int64_t error = max_ulp_error(vec_tanh, tanh_reference, &worst);
  EXPECT_LE(error, 3) << "at x = " << worst;
}

TEST(VecActivations, SigmoidTailReachesTheDenormals) {
  // 1 / (1 + e^-x) in float gives 0 from x = -88.7 on; the true values are denormals down to
  // x = -103.97 and round to 0 below.
  for (float x : {-88.0f, -90.0f, -95.0f, -100.0f, -103.0f}) {
    const float expected = static_cast<float>(sigmoid_reference(x));
    ASSERT_LT(expected, std::numeric_limits<float>::min());
    ASSERT_GT(expected, 0.0f);
    EXPECT_LE(ulp_distance(vec_sigmoid(x), expected), 3) << "x = " << x;
  }
  EXPECT_EQ(vec_sigmoid(-104.5f), 0.0f);
  EXPECT_EQ(vec_sigmoid(-1e30f), 0.0f);
}

TEST(VecActivations, SpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vec_sigmoid(kInf), 1.0f);
  EXPECT_EQ(vec_sigmoid(-kInf), 0.0f);
  EXPECT_EQ(vec_sigmoid(0.0f), 0.5f);
  EXPECT_EQ(vec_sigmoid(-0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(vec_sigmoid(nan)));
  EXPECT_TRUE(std::isnan(vec_sigmoid(-nan)));
  EXPECT_EQ(vec_tanh(kInf), 1.0f);
  EXPECT_EQ(vec_tanh(-kInf), -1.0f);
  EXPECT_EQ(vec_tanh(1e30f), 1.0f);
  EXPECT_EQ(vec_tanh(-1e30f), -1.0f);
  EXPECT_TRUE(std::isnan(vec_tanh(nan)));
  EXPECT_TRUE(std::isnan(vec_tanh(-nan)));
  // Signed zeros and denormals: tanh(x) = x to float precision.
  EXPECT_EQ(std::bit_cast<uint32_t>(vec_tanh(0.0f)), std::bit_cast<uint32_t>(0.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(vec_tanh(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  for (float x : {std::numeric_limits<float>::denorm_min(), 1e-40f, std::numeric_limits<float>::min(), -1e-40f,
                  -std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(vec_tanh(x), x) << "x = " << x;
    EXPECT_EQ(vec_sigmoid(x), 0.5f) << "x = " << x;
  }
}

// ember::sigmoid and ember::tanh on float32 cpu tensors run these bodies (cpu_unary.cpp), on
// any layout: the same bits, and sigmoid's tail below -88.7 is no longer 0.
TEST(VecActivations, CpuFloatSigmoidAndTanhOpsUseThem) {
  std::vector<float> xs;
  for (float x = -110.0f; x < 110.0f; x += 0.37f) xs.push_back(x);
  xs.resize(594);  // 2 x 297: a transposed view below
  const Tensor x = tensor(xs);
  for (const Tensor& in : {x, x.reshape({2, 297}).t(), x.narrow(0, 1, 300)}) {
    const Tensor sig = sigmoid(in).contiguous(), th = ember::tanh(in).contiguous(), flat = in.contiguous();
    const float *px = flat.data_ptr<float>(), *ps = sig.data_ptr<float>(), *pt = th.data_ptr<float>();
    for (int64_t k = 0; k < flat.numel(); ++k) {
      ASSERT_EQ(std::bit_cast<uint32_t>(ps[k]), std::bit_cast<uint32_t>(vec_sigmoid(px[k]))) << "x = " << px[k];
      ASSERT_EQ(std::bit_cast<uint32_t>(pt[k]), std::bit_cast<uint32_t>(vec_tanh(px[k]))) << "x = " << px[k];
    }
  }
  EXPECT_GT(sigmoid(tensor(std::vector<float>{-100.0f})).item<float>(), 0.0f);
}

}  // namespace
}  // namespace ember::detail::cpu
