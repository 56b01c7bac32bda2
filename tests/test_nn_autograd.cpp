// Modules and optimizers with autograd: parameters require grad, zero_grad, step() on
// backward's gradients (five steps of a least-squares fit against PyTorch 1.13's numbers,
// /usr/bin/python3), and an optimizer built before Module::to() updating the moved model.
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

// y = x W^T + b through ops that autograd differentiates.
class Affine : public nn::Module {
 public:
  Affine() {
    weight = register_parameter("weight", (arange(6, kFloat32).view({2, 3}) - 2.5) / 4);
    bias = register_parameter("bias", tensor({0.5f, -0.5f}));
  }
  Tensor forward(const Tensor& x) override { return matmul(x, weight.t()) + bias; }
  Tensor weight, bias;
};

float fit(nn::Module& model, optim::Optimizer& opt, Device device) {
  Tensor x = (arange(12, kFloat32).view({4, 3}) / 6 - 1).to(device);
  Tensor target = (arange(8, kFloat32).view({4, 2}) / 4).to(device);
  float loss_value = 0;
  for (int k = 0; k < 5; ++k) {
    opt.zero_grad();
    Tensor loss = (model(x) - target).pow(2).mean();
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();
  }
  return loss_value;
}

void expect_fit(const Affine& model, float loss, const std::vector<float>& expected) {
  std::vector<float> got = model.weight.to_vector<float>();
  for (float v : model.bias.to_vector<float>()) got.push_back(v);
  got.push_back(loss);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << "element " << i;
}

class NnAutograd : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    backends::cuda::matmul.allow_tf32 = false;
  }
  void TearDown() override { backends::cuda::matmul.allow_tf32 = true; }
};

TEST_P(NnAutograd, StepUsesBackwardsGradientsAsPyTorch) {
  Affine sgd_model;
  sgd_model.to(dev_);
  optim::SGD sgd(sgd_model.parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  expect_fit(sgd_model, fit(sgd_model, sgd, dev_),
             {0.0931898355f, 0.369442165f, 0.645694673f, -0.265857816f, 0.252773613f, 0.771405101f, 0.657514274f,
              1.11178875f, 0.0307334773f});
  Affine adamw_model;
  adamw_model.to(dev_);
  optim::AdamW adamw(adamw_model.parameters(), optim::AdamWOptions(0.05));
  expect_fit(adamw_model, fit(adamw_model, adamw, dev_),
             {-0.375620306f, -0.126536652f, 0.122537591f, -0.122223459f, 0.130572602f, 0.874296725f, 0.661019266f,
              -0.250365019f, 1.11881161f});
}

TEST_P(NnAutograd, AnOptimizerBuiltBeforeToUpdatesTheMovedModel) {
  // The spec's pattern: parameters handed to the optimizer, then the model moves.
  Affine model;
  optim::AdamW adamw(model.parameters(), optim::AdamWOptions(0.05));
  model.to(dev_);
  float loss = fit(model, adamw, dev_);
  EXPECT_EQ(model.weight.device(), dev_);
  expect_fit(model, loss,
             {-0.375620306f, -0.126536652f, 0.122537591f, -0.122223459f, 0.130572602f, 0.874296725f, 0.661019266f,
              -0.250365019f, 1.11881161f});
}

EMBER_ON_DEVICES(NnAutograd, "cpu", "cuda:0");

TEST(NnAutogradState, ParametersRequireGradAndStateDictEntriesDoNot) {
  nn::Linear linear(3, 2);
  EXPECT_TRUE(linear.weight.requires_grad());
  EXPECT_TRUE(linear.weight.is_leaf());
  EXPECT_FALSE(linear.state_dict()["weight"].requires_grad());
  nn::BatchNorm1d bn(2);
  EXPECT_FALSE(bn.running_mean.requires_grad());
  nn::Module m;
  Tensor frozen = m.register_parameter("frozen", ones({2}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_EQ(m.parameters().size(), 1u);
}

TEST(NnAutogradState, ZeroGradSetsToNoneOrZeroes) {
  Affine model;
  (model(ones({1, 3})).sum()).backward();
  ASSERT_TRUE(model.weight.grad().defined());
  model.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(model.weight.grad().abs().sum().item<float>(), 0.0f);
  model.zero_grad();
  EXPECT_FALSE(model.weight.grad().defined());
  EXPECT_FALSE(model.bias.grad().defined());
}

TEST(NnAutogradState, StepSkipsParametersWithoutGradients) {
  Tensor a = ones({2}).requires_grad_();
  Tensor b = ones({2}).requires_grad_();
  optim::SGD sgd({a, b}, optim::SGDOptions(0.5));
  (a * 3).sum().backward();
  sgd.step();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{-0.5f, -0.5f}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  sgd.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(NnAutogradState, ToMovesGradientsWithTheirParameters) {
  ember::testing::ensure_cuda();
  Affine model;
  (model(ones({1, 3})).sum()).backward();
  Tensor grad = model.weight.grad();
  model.to("cuda:0");
  EXPECT_EQ(model.weight.grad().device(), Device("cuda:0"));
  EXPECT_TRUE(model.weight.grad().is_same(grad));
  EXPECT_TRUE(model.weight.requires_grad());
  EXPECT_TRUE(model.weight.is_leaf());
}

}  // namespace
}  // namespace ember
