// The spec's TF32 example, observable on cuda devices (driver and emulated): float32
// matmul and convolution with TF32 allowed round inputs to a 10-bit mantissa, so their
// error against a float64 reference grows by about two orders of magnitude. The cpu
// computes in full float32 whatever the flags, as PyTorch's does.
#include "test_support.h"

using namespace ember;

namespace {

class Tf32 : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    manual_seed(0);
  }
  void TearDown() override {
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
  }
  // max |approx - reference| / mean |reference|, as in the spec.
  static double relative_error(const Tensor& approx, const Tensor& reference) {
    const double mean = reference.abs().mean().item<double>();
    return (approx.to(kFloat64) - reference).abs().max().item<double>() / mean;
  }
};

TEST_P(Tf32, MatmulPrecisionTradeOffOfTheSpec) {
  Tensor a_full = randn({1024, 1024}, TensorOptions(kFloat64).device(dev_));
  Tensor b_full = randn({1024, 1024}, TensorOptions(kFloat64).device(dev_));
  Tensor ab_full = matmul(a_full, b_full);
  Tensor a = a_full.to(kFloat32), b = b_full.to(kFloat32);

  ASSERT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));  // the default
  const double tf32_error = relative_error(matmul(a, b), ab_full);
  backends::cuda::matmul.allow_tf32 = false;
  const double fp32_error = relative_error(matmul(a, b), ab_full);
  if (dev_.is_cpu()) {
    EXPECT_LT(tf32_error, 3e-5);  // full float32 with TF32 allowed
    EXPECT_EQ(tf32_error, fp32_error);
    return;
  }
  // The spec's 10240^2 example: 0.0022 vs 0.000039; at 1024^2 the sums are shorter.
  EXPECT_GT(tf32_error, 3e-4);
  EXPECT_LT(tf32_error, 1e-2);
  EXPECT_LT(fp32_error, 3e-5);
  EXPECT_GT(tf32_error, 20 * fp32_error) << tf32_error << " vs " << fp32_error;

  // "medium" allows TF32 too; "highest" does not.
  set_float32_matmul_precision("medium");
  EXPECT_NEAR(relative_error(matmul(a, b), ab_full), tf32_error, 1e-12);
  set_float32_matmul_precision("highest");
  EXPECT_NEAR(relative_error(matmul(a, b), ab_full), fp32_error, 1e-12);
  // float64 matmul never uses TF32.
  set_float32_matmul_precision("high");
  EXPECT_LT(relative_error(matmul(a_full, b_full), ab_full), 1e-12);
}

TEST_P(Tf32, ConvolutionFollowsTheCudnnFlagNotTheMatmulFlag) {
  Tensor x_full = randn({2, 64, 20, 20}, TensorOptions(kFloat64).device(dev_));
  Tensor w_full = randn({32, 64, 5, 5}, TensorOptions(kFloat64).device(dev_));
  Tensor ref = conv2d(x_full, w_full, {}, {1}, {2});
  Tensor x = x_full.to(kFloat32), w = w_full.to(kFloat32);

  backends::cuda::matmul.allow_tf32 = false;  // irrelevant to convolutions
  const double tf32_error = relative_error(conv2d(x, w, {}, {1}, {2}), ref);
  backends::cudnn.allow_tf32 = false;
  backends::cuda::matmul.allow_tf32 = true;
  const double fp32_error = relative_error(conv2d(x, w, {}, {1}, {2}), ref);
  if (dev_.is_cpu()) {
    EXPECT_LT(tf32_error, 3e-5);  // full float32 with cuDNN's TF32 allowed
    EXPECT_EQ(tf32_error, fp32_error);
    return;
  }
  EXPECT_GT(tf32_error, 3e-4);
  EXPECT_LT(tf32_error, 1e-2);
  EXPECT_LT(fp32_error, 3e-5);
  EXPECT_GT(tf32_error, 20 * fp32_error) << tf32_error << " vs " << fp32_error;
}

EMBER_ON_DEVICES(Tf32, "cpu", "cuda:0");

}  // namespace
