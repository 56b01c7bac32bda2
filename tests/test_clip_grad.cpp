// nn::utils::clip_grad_norm_ and clip_grad_value_ on the cpu and cuda devices (emulated
// without a GPU), against PyTorch 1.13's torch.nn.utils (numbers from /usr/bin/python3):
//   a = [[1, -2], [3, .5]], b = [4, -1, .25], c = [9] (no grad); a.grad = [[.5, -1.5], [2, 0]],
//   b.grad = [-3, 1, .25]; clip_grad_norm_([a, b, c], 1.5, norm_type=p).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/ember.h"
#include "ops/foreach.h"
#include "test_support.h"

namespace ember::testing {
namespace {

using nn::utils::clip_grad_norm_;
using nn::utils::clip_grad_value_;

class ClipGrad : public OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    a = tensor({{1.0f, -2.0f}, {3.0f, 0.5f}}).to(dev_).requires_grad_();
    b = tensor({4.0f, -1.0f, 0.25f}).to(dev_).requires_grad_();
    c = tensor({9.0f}).to(dev_).requires_grad_();
    reset();
  }
  void reset() {
    a.mutable_grad() = tensor({{0.5f, -1.5f}, {2.0f, 0.0f}}).to(dev_);
    b.mutable_grad() = tensor({-3.0f, 1.0f, 0.25f}).to(dev_);
  }
  static void expect_values(const Tensor& t, const std::vector<float>& expected) {
    const std::vector<float> got = t.cpu().reshape({-1}).to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << "element " << i;
  }
  Tensor a, b, c;
};

TEST_P(ClipGrad, NormMatchesPyTorchForEveryOrder) {
  struct Case {
    double p;
    float total;
    std::vector<float> a, b;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {2.0,
       4.069705009460449f,
       {0.18428850f, -0.55286551f, 0.73715401f, 0.0f},
       {-1.10573101f, 0.36857700f, 0.09214425f}},
      {1.0, 8.25f, {0.09090908f, -0.27272725f, 0.36363631f, 0.0f}, {-0.54545450f, 0.18181816f, 0.04545454f}},
      {inf, 3.0f, {0.24999991f, -0.74999976f, 0.99999964f, 0.0f}, {-1.49999952f, 0.49999982f, 0.12499996f}},
      {3.0,
       3.4060914516448975f,
       {0.22019367f, -0.66058099f, 0.88077468f, 0.0f},
       {-1.32116199f, 0.44038734f, 0.11009683f}},
      {0.5,
       43.271610260009766f,
       {0.01733238f, -0.05199714f, 0.06932952f, 0.0f},
       {-0.10399428f, 0.03466476f, 0.00866619f}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE("norm_type " + std::to_string(k.p));
    reset();
    Tensor total = clip_grad_norm_({a, b, c}, 1.5, k.p);
    EXPECT_EQ(total.device(), dev_);
    EXPECT_EQ(total.dim(), 0);
    EXPECT_NEAR(total.item<float>(), k.total, 1e-5 * k.total);
    expect_values(a.grad(), k.a);
    expect_values(b.grad(), k.b);
    EXPECT_FALSE(c.grad().defined());
  }
}

TEST_P(ClipGrad, SmallNormsAreLeftAloneAndNoGradientsGiveZero) {
  Tensor total = clip_grad_norm_({a, b}, 100.0);
  EXPECT_NEAR(total.item<float>(), 4.069705009460449f, 1e-5);
  expect_values(a.grad(), {0.5f, -1.5f, 2.0f, 0.0f});
  Tensor none = clip_grad_norm_(c, 1.0);
  EXPECT_TRUE(none.device().is_cpu());
  EXPECT_EQ(none.item<float>(), 0.0f);
  EXPECT_EQ(clip_grad_norm_(std::vector<Tensor>{}, 1.0).item<float>(), 0.0f);
}

TEST_P(ClipGrad, NonFiniteNormIsPyTorchsErrorAndLeavesGradientsAlone) {
  b.mutable_grad() = tensor({std::nanf(""), 1.0f, 1.0f}).to(dev_);
  EXPECT_THROW_MSG(clip_grad_norm_({a, b}, 1.0, 2.0, /*error_if_nonfinite=*/true), Error,
                   "The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be "
                   "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                   "`error_if_nonfinite=False`");
  expect_values(a.grad(), {0.5f, -1.5f, 2.0f, 0.0f});
  b.mutable_grad() = tensor({std::numeric_limits<float>::infinity(), 1.0f, 1.0f}).to(dev_);
  EXPECT_THROW_MSG(clip_grad_norm_({a, b}, 1.0, std::numeric_limits<double>::infinity(), true), Error,
                   "The total norm of order inf for gradients");
  // Without the check, the gradients are scaled by the non-finite norm, as PyTorch's.
  Tensor total = clip_grad_norm_({a, b}, 1.0);
  EXPECT_TRUE(std::isinf(total.item<float>()));
  expect_values(a.grad(), {0.0f, -0.0f, 0.0f, 0.0f});
}

TEST_P(ClipGrad, ValueClampsEachGradient) {
  clip_grad_value_({a, c}, 1.0);
  expect_values(a.grad(), {0.5f, -1.0f, 1.0f, 0.0f});
  EXPECT_FALSE(c.grad().defined());
  clip_grad_value_(b, 0.5);
  expect_values(b.grad(), {-0.5f, 0.5f, 0.25f});
}

TEST_P(ClipGrad, ForeachMulScalesEveryTensorInPlace) {
  Tensor wide = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}).to(dev_);
  Tensor strided = wide.t();  // not contiguous: scaled by its own mul_
  Tensor flat = tensor({-1.0f, 0.5f}).to(dev_);
  Tensor empty_one = zeros({0}, dev_);
  const uint32_t version = flat._version();
  detail::foreach_mul_({flat, empty_one, strided}, tensor({2.0}, kFloat64).to(dev_));
  expect_values(flat, {-2.0f, 1.0f});
  expect_values(wide, {2.0f, 4.0f, 6.0f, 8.0f, 10.0f, 12.0f});
  EXPECT_GT(flat._version(), version);
  EXPECT_THROW_MSG(detail::foreach_mul_({flat, zeros({1}, TensorOptions(kFloat64).device(dev_))}, tensor({1.0f})),
                   ValueError, "expected tensors of one device and dtype");
  EXPECT_THROW_MSG(detail::foreach_mul_({flat}, tensor({1.0f, 2.0f})), ValueError,
                   "the scale must be a one-element tensor, got 2 elements");
  expect_values(flat, {-2.0f, 1.0f});
}

EMBER_ON_DEVICES(ClipGrad, "cpu", "cuda:0");

TEST(ClipGradDevices, GradientsOnTwoDevicesShareOneTotal) {
  EMBER_REQUIRE_DEVICES(2);
  Tensor a = zeros({2}, Device("cuda:0")).requires_grad_();
  Tensor b = zeros({1}, Device("cuda:1")).requires_grad_();
  Tensor d = zeros({1}, TensorOptions(kFloat64)).requires_grad_();
  a.mutable_grad() = tensor({3.0f, 0.0f}).to(Device("cuda:0"));
  b.mutable_grad() = tensor({4.0f}).to(Device("cuda:1"));
  d.mutable_grad() = tensor({12.0}, kFloat64);
  Tensor total = clip_grad_norm_({a, b, d}, 6.5);
  EXPECT_EQ(total.device(), Device("cuda:0"));
  EXPECT_NEAR(total.item<double>(), 13.0, 1e-5);
  EXPECT_NEAR(a.grad().cpu().to_vector<float>()[0], 1.5f, 1e-5);
  EXPECT_NEAR(b.grad().cpu().to_vector<float>()[0], 2.0f, 1e-5);
  EXPECT_NEAR(d.grad().to_vector<double>()[0], 6.0, 1e-5);
  EXPECT_EQ(b.grad().device(), Device("cuda:1"));
}

}  // namespace
}  // namespace ember::testing
