// Built-in modules' forward against values from PyTorch 1.13 (/usr/bin/python3) for fixed
// weights, on the cpu and on cuda devices (TF32 off, so float32 matches); default
// initialisation and nn::init against torch.nn.init's formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/ember.h"
#include "nn/python_repr.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;

void expect_near(const Tensor& got, const std::vector<float>& expected, float tol = 1e-5f) {
  std::vector<float> values = got.to_vector<float>();
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected[i], tol) << "element " << i;
}

class NnLayers : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    backends::cuda::matmul.allow_tf32 = false;
    backends::cudnn.allow_tf32 = false;
  }
  void TearDown() override {
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
  }
};

TEST_P(NnLayers, LinearMatchesPyTorch) {
  nn::Linear linear(6, 3);
  NoGradGuard no_grad;  // setting parameters, as under torch.no_grad()
  linear.weight.copy_(arange(18, kFloat32).view({3, 6}) / 10 - 0.8);
  linear.bias.copy_(tensor({0.5f, -0.25f, 1.0f}));
  linear.to(dev_);
  Tensor x = (arange(-6, 6, 1, kFloat32).view({2, 6}) / 4).to(dev_);
  Tensor y = linear(x);
  EXPECT_EQ(y.device(), dev_);
  expect_near(y, {3.825000286102295f, -0.07499997317790985f, -1.9749999046325684f, -1.125f, 0.375f, 3.875f});
}

TEST_P(NnLayers, Conv2dMatchesPyTorch) {
  nn::Conv2d conv(2, 3, 3, /*stride=*/2, /*padding=*/1);
  NoGradGuard no_grad;
  conv.weight.copy_(arange(54, kFloat32).view({3, 2, 3, 3}) / 50 - 0.5);
  conv.bias.copy_(tensor({0.1f, -0.2f, 0.3f}));
  conv.to(dev_);
  Tensor x = (arange(50, kFloat32).view({1, 2, 5, 5}) / 25 - 1).to(dev_);
  Tensor y = conv(x);
  EXPECT_EQ(y.sizes(), (IntList{1, 3, 3, 3}));
  expect_near(y, {1.3671998977661133f,   1.8344001770019531f,    1.1304000616073608f,   1.045600175857544f,
                  1.1823999881744385f,   0.5752000212669373f,    -0.13039997220039368f, -0.527199923992157f,
                  -0.5207999348640442f,  -0.027199983596801758f, 0.15200002491474152f,  0.08160005509853363f,
                  0.40000003576278687f,  0.7527999877929688f,    0.44800007343292236f,  0.20319996774196625f,
                  0.3824000358581543f,   0.1584000438451767f,    -0.6215999722480774f,  -0.730400025844574f,
                  -0.16720005869865417f, 0.5543999671936035f,    1.1231998205184937f,   1.1208000183105469f,
                  1.3368000984191895f,   2.0920000076293945f,    1.6375999450683594f});
}

TEST_P(NnLayers, ActivationsAndFlattenMatchPyTorch) {
  Tensor v = tensor({-2.0f, -0.5f, 0.0f, 0.5f, 2.0f}).to(dev_);
  expect_near(nn::ReLU()(v), {0, 0, 0, 0.5f, 2.0f});
  expect_near(nn::Sigmoid()(v),
              {0.11920291930437088f, 0.3775406777858734f, 0.5f, 0.622459352016449f, 0.8807970285415649f});
  expect_near(nn::Tanh()(v),
              {-0.9640275835990906f, -0.46211716532707214f, 0.0f, 0.46211716532707214f, 0.9640275835990906f});
  Tensor x = arange(24, kFloat32).view({2, 3, 2, 2}).to(dev_);
  EXPECT_EQ(nn::Flatten()(x).sizes(), (IntList{2, 12}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).sizes(), (IntList{6, 2, 2}));
  EXPECT_EQ(nn::Flatten(-2)(x).sizes(), (IntList{2, 3, 4}));
  EXPECT_TRUE(nn::Flatten()(x).cpu().equal(arange(24, kFloat32).view({2, 12})));
}

TEST_P(NnLayers, SequentialChainsItsModules) {
  auto first = std::make_shared<nn::Linear>(6, 3);
  nn::Sequential seq{first, std::make_shared<nn::ReLU>()};
  NoGradGuard no_grad;
  first->weight.copy_(arange(18, kFloat32).view({3, 6}) / 10 - 0.8);
  first->bias.copy_(tensor({0.5f, -0.25f, 1.0f}));
  seq.to(dev_);
  Tensor x = (arange(-6, 6, 1, kFloat32).view({2, 6}) / 4).to(dev_);
  expect_near(seq(x), {3.825000286102295f, 0.0f, 0.0f, 0.0f, 0.375f, 3.875f});
}

TEST_P(NnLayers, WrongInputShapesNameTheModuleAndBothShapes) {
  nn::Linear linear(784, 128);
  linear.to(dev_);
  EXPECT_EQ(error_of<ValueError>([&] {
              linear(ones({64, 100}, dev_));
            }),
            "Linear(in_features=784, out_features=128, bias=True): mat1 and mat2 shapes cannot be multiplied "
            "(64x100 and 784x128)");
  nn::Conv2d conv(1, 8, 3);
  conv.to(dev_);
  EXPECT_EQ(error_of<ValueError>([&] {
              conv(ones({64, 3, 28, 28}, dev_));
            }),
            "Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1)): Given groups=1, weight of size [8, 1, 3, 3], expected "
            "input[64, 3, 28, 28] to have 1 channels, but got 3 channels instead");
}

TEST_P(NnLayers, BatchNormMatchesPyTorchInTrainingAndEval) {
  std::vector<float> values(2 * 3 * 4 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 2;
  Tensor x = tensor(values).view({2, 3, 4, 4}).to(dev_);  // (i % 7 - 3) / 2
  nn::BatchNorm2d bn(3);
  {
    NoGradGuard no_grad;
    bn.weight.copy_(tensor({1.0f, 0.5f, 2.0f}));
    bn.bias.copy_(tensor({0.0f, 0.1f, -0.2f}));
  }
  bn.to(dev_);
  Tensor y = bn(x);
  expect_near(y.select(0, 1).select(1, 0).slice(1, 0, 2),
              {1.4971523f, -1.3489194f, -0.38924336f, -0.12831357f, -0.3304649f, 0.71325427f});
  expect_near(bn.running_mean, {-0.0078125f, -0.0062500000931322575f, 0.0062500000931322575f});
  expect_near(bn.running_var, {1.0146925449371338f, 0.9947580695152283f, 0.9947580695152283f});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn.eval();
  expect_near(bn(x).select(0, 1).select(1, 0).slice(1, 0, 2),
              {1.4968489f, -1.4813375f, -0.39817995f, -0.14752337f, -0.21253283f, 0.79009348f});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // momentum None: a cumulative average of the batch statistics.
  nn::BatchNorm1d cumulative(2, 1e-5, std::nullopt);
  cumulative.to(dev_);
  Tensor x1 = tensor({{1.0f, 2.0f}, {3.0f, -1.0f}, {0.5f, 0.0f}}).to(dev_);
  cumulative(x1);
  cumulative(x1 * 2);
  expect_near(cumulative.running_mean, {2.25f, 0.5f});
  expect_near(cumulative.running_var, {4.375f, 5.8333330154418945f});
  EXPECT_EQ(error_of<ValueError>([&] {
              bn(ones({2, 3}, dev_));
            }),
            "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True): expected 4D input "
            "(got 2D input)");
}

TEST_P(NnLayers, PoolingMatchesPyTorch) {
  std::vector<float> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i * 7 % 11);
  Tensor x = tensor(values).view({1, 1, 4, 4}).to(dev_);
  expect_near(nn::MaxPool2d(2)(x), {7.0f, 10.0f, 8.0f, 10.0f});
  expect_near(nn::AvgPool2d(3, 1, 1)(x),
              {1.6666666f, 3.0f, 4.0f, 3.0f, 2.6666667f, 4.4444447f, 5.3333335f, 3.4444444f, 3.0f, 5.5555553f,
               5.2222223f, 3.7777777f, 2.1111112f, 3.6666667f, 3.4444444f, 2.2222223f});
}

TEST_P(NnLayers, DropoutDropsOnlyInTraining) {
  nn::Dropout dropout(0.25);
  Tensor x = ones({1000}, dev_);
  manual_seed(3);
  std::vector<float> values = dropout(x).to_vector<float>();
  int zeros = 0;
  for (float v : values) {
    if (v == 0) ++zeros;
    else EXPECT_FLOAT_EQ(v, 1 / 0.75f);
  }
  EXPECT_GT(zeros, 180);
  EXPECT_LT(zeros, 320);
  dropout.eval();
  EXPECT_TRUE(dropout(x).equal(x));
}

EMBER_ON_DEVICES(NnLayers, "cpu", "cuda:0");

// ---- initialisation ----------------------------------------------------------------------

void expect_within(const Tensor& t, double bound) {
  std::vector<float> values = t.to(kFloat32).to_vector<float>();
  float lo = *std::min_element(values.begin(), values.end()), hi = *std::max_element(values.begin(), values.end());
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.8 * bound) << "the draw should nearly fill [-bound, bound]";
  EXPECT_GT(hi, 0.8 * bound);
}

TEST(NnInit, DefaultInitialisationIsPyTorchs) {
  manual_seed(0);
  nn::Linear linear(400, 300);
  expect_within(linear.weight, 1 / std::sqrt(400.0));  // kaiming_uniform_(a=sqrt(5)) = 1/sqrt(fan_in)
  expect_within(linear.bias, 1 / std::sqrt(400.0));
  nn::Conv2d conv(4, 64, {3, 5});
  expect_within(conv.weight, 1 / std::sqrt(4 * 15.0));
  expect_within(conv.bias, 1 / std::sqrt(4 * 15.0));
  // The same seed draws the same parameters.
  manual_seed(0);
  nn::Linear again(400, 300);
  EXPECT_TRUE(again.weight.equal(linear.weight));
}

TEST(NnInit, GainsAndFansAreTorchNnInits) {
  EXPECT_EQ(nn::init::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(nn::init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3));
  EXPECT_EQ(nn::init::calculate_gain("selu"), 0.75);
  EXPECT_EQ(error_of<ValueError>([] { nn::init::calculate_gain("gelu"); }), "Unsupported nonlinearity gelu");
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 5})), (std::pair<int64_t, int64_t>{60, 120}));
  EXPECT_EQ(error_of<ValueError>([] { nn::init::calculate_fan_in_and_fan_out(empty({8})); }),
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  EXPECT_EQ(error_of<ValueError>([] {
              nn::init::kaiming_uniform_(empty({8, 4}), 0, "fan_avg");
            }),
            "Mode fan_avg not supported, please use one of fan_in, fan_out");
}

TEST(NnInit, FillsInPlaceWithTheDocumentedBounds) {
  manual_seed(1);
  Tensor w = empty({200, 100});
  Tensor same = nn::init::kaiming_uniform_(w, 0, "fan_out", "relu");
  EXPECT_TRUE(same.is_same(w));
  expect_within(w, std::sqrt(2.0) * std::sqrt(3.0 / 200));
  nn::init::xavier_uniform_(w, 2.0);
  expect_within(w, 2.0 * std::sqrt(6.0 / 300));
  nn::init::uniform_(w, -0.25, 0.25);
  expect_within(w, 0.25);
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(w.pow(2).mean().item<float>(), 2.0 / 300, 2.0 / 300 * 0.05);
  nn::init::kaiming_normal_(w, 0, "fan_in", "relu");
  EXPECT_NEAR(w.pow(2).mean().item<float>(), 2.0 / 100, 2.0 / 100 * 0.05);
  nn::init::normal_(w, 3.0, 0.5);
  EXPECT_NEAR(w.mean().item<float>(), 3.0, 0.01);
  nn::init::constant_(w, 1.5);
  EXPECT_EQ(w.max().item<float>(), 1.5f);
  nn::init::zeros_(w);
  EXPECT_EQ(w.abs().max().item<float>(), 0.0f);
  nn::init::ones_(w);
  EXPECT_EQ(w.min().item<float>(), 1.0f);
  Tensor none = empty({0, 4});
  EXPECT_TRUE(nn::init::kaiming_uniform_(none).is_same(none));  // a no-op, as PyTorch's
}

TEST(NnRepr, LayerReprsArePyTorchs) {
  EXPECT_EQ(nn::BatchNorm1d(5).repr(),
            "BatchNorm1d(5, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  EXPECT_EQ(nn::BatchNorm2d(5, 1e-3, std::nullopt, false, false).repr(),
            "BatchNorm2d(5, eps=0.001, momentum=None, affine=False, track_running_stats=False)");
  EXPECT_EQ(nn::MaxPool2d(2).repr(), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::MaxPool2d({2, 3}, 1, 1).repr(),
            "MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::AvgPool2d(2).repr(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(nn::AvgPool2d(3, 1, 1).repr(), "AvgPool2d(kernel_size=3, stride=1, padding=1)");
  EXPECT_EQ(nn::Dropout(0.25).repr(), "Dropout(p=0.25, inplace=False)");
  EXPECT_EQ(error_of<ValueError>([] { nn::Dropout(1.5); }),
            "dropout probability has to be between 0 and 1, but got 1.5");
  nn::BatchNorm2d bn(3, 1e-5, 0.1, /*affine=*/false);
  EXPECT_EQ(bn.state_dict().keys(), (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_TRUE(bn.parameters().empty());
}

TEST(NnRepr, FloatsPrintAsPythonRepr) {
  using detail::python_float;
  EXPECT_EQ(python_float(1e-5), "1e-05");
  EXPECT_EQ(python_float(0.1), "0.1");
  EXPECT_EQ(python_float(0.001), "0.001");
  EXPECT_EQ(python_float(0.0001), "0.0001");
  EXPECT_EQ(python_float(2.0), "2.0");
  EXPECT_EQ(python_float(-0.25), "-0.25");
  EXPECT_EQ(python_float(123456.5), "123456.5");
  EXPECT_EQ(python_float(1e16), "1e+16");
  EXPECT_EQ(python_float(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float(1.5e-20), "1.5e-20");
  EXPECT_EQ(python_float(0.333333), "0.333333");
  EXPECT_EQ(python_float(0.0), "0.0");
}

}  // namespace
}  // namespace ember
