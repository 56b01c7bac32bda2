// Optimizers against torch.optim of PyTorch 1.13 (/usr/bin/python3): three steps of each
// rule on a [2, 3] and a [2] parameter with gradients g = 0.5 p + 0.1 (k + 1) and
// g = -0.25 q + 0.3 - 0.2 k, on the cpu and on cuda devices; one fused launch per group.
#include <gtest/gtest.h>

#include <functional>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;

// Runs the algorithm's update on explicit gradients (what step() does with p.grad()).
template <typename Opt>
struct Driven : Opt {
  using Opt::Opt;
  void apply(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) { this->update(0, params, grads); }
};

struct Case {
  std::vector<Tensor> params;
  Tensor p, q;
};

Case make_params(Device device, DType dtype = kFloat32) {
  Case c;
  c.p = ((arange(6, TensorOptions(dtype)).view({2, 3}) - 2.5) / 4).to(device);
  c.q = tensor({1.5, -0.75}).to(TensorOptions(dtype).device(device));
  c.params = {c.p, c.q};
  return c;
}

template <typename Opt>
std::vector<double> run(Driven<Opt>& opt, const Case& c, int steps = 3) {
  for (int k = 0; k < steps; ++k) {
    Tensor gp = c.p * 0.5 + (k + 1) * 0.1;
    Tensor gq = c.q * -0.25 + (0.3 - k * 0.2);
    opt.apply(c.params, {gp, gq});
  }
  std::vector<double> out = c.p.to(kFloat64).to_vector<double>();
  for (double v : c.q.to(kFloat64).to_vector<double>()) out.push_back(v);
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& expected, double tol = 2e-7) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

class Optim : public ember::testing::OnDevice {};

TEST_P(Optim, SGDMatchesPyTorch) {
  Case c = make_params(dev_);
  Driven<optim::SGD> plain(c.params, optim::SGDOptions(0.1));
  expect_close(run(plain, c), {-0.593884349f, -0.379540622f, -0.165196881f, 0.0491468683f, 0.263490617f, 0.477834404f,
                               1.58356726f, -0.83943671f});
  c = make_params(dev_);
  Driven<optim::SGD> momentum(c.params, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01));
  expect_close(run(momentum, c), {-0.547984838f, -0.363091201f, -0.178197518f, 0.00669617113f, 0.191589877f,
                                  0.37648356f, 1.6031208f, -0.93966651f});
  c = make_params(dev_);
  Driven<optim::SGD> nesterov(c.params, optim::SGDOptions(0.05).momentum(0.8).nesterov(true).weight_decay(5e-4));
  expect_close(run(nesterov, c), {-0.581430137f, -0.374565423f, -0.167700708f, 0.039164003f, 0.246028706f, 0.452893436f,
                                  1.58806479f, -0.868041515f});
}

TEST_P(Optim, AdamAndAdamWMatchPyTorch) {
  Case c = make_params(dev_);
  Driven<optim::Adam> adam(c.params, optim::AdamOptions(0.01));
  expect_close(run(adam, c), {-0.598366678f, -0.362663597f, -0.153042212f, 0.0953110307f, 0.345056295f, 0.594985664f,
                              1.52795887f, -0.77788806f});
  c = make_params(dev_);
  Driven<optim::Adam> decayed(c.params, optim::AdamOptions(0.02).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.1));
  expect_close(run(decayed, c), {-0.570397139f, -0.341295809f, -0.181751519f, 0.0647705048f, 0.314594269f, 0.56461668f,
                                 1.50170767f, -0.80235821f});
  c = make_params(dev_);
  Driven<optim::AdamW> adamw(c.params, optim::AdamWOptions(0.01).weight_decay(0.05));
  expect_close(run(adamw, c), {-0.597456157f, -0.362131178f, -0.152839854f, 0.0951383412f, 0.344508737f, 0.594063342f,
                               1.52569664f, -0.776746452f});
}

TEST_P(Optim, Float64FollowsPyTorchToDoubleRounding) {
  Case c = make_params(dev_, kFloat64);
  Driven<optim::Adam> adam(c.params, optim::AdamOptions(0.02).betas({0.8, 0.99}).eps(1e-6).weight_decay(0.1));
  expect_close(run(adam, c),
               {-0.57039715815238234, -0.34129578458523496, -0.18175150442564333, 0.06477049873972425,
                0.31459425629292603, 0.56461670829240385, 1.5017077772724308, -0.80235815828989587},
               1e-15);
}

TEST_P(Optim, NonContiguousParametersAndGradientsPairTheRightElements) {
  // p is a transposed view; its gradient is given in yet another layout.
  Tensor base = ((arange(6, kFloat32).view({3, 2}) - 2.5) / 4).to(dev_);
  Tensor p = base.t();
  Tensor expected = p.contiguous().clone();
  Tensor grad = (arange(6, kFloat32).view({2, 3}) / 10).to(dev_);
  Tensor grad_t = grad.t().contiguous().t();  // same values, column-major
  Driven<optim::SGD> sgd({p}, optim::SGDOptions(0.5));
  sgd.apply({p}, {grad_t});
  expected -= grad * 0.5;
  EXPECT_TRUE(p.allclose(expected)) << p << expected;
  EXPECT_TRUE(base.t().allclose(expected));
}

TEST_P(Optim, ComplexParametersUpdateAsTheirRealView) {
  Tensor z =
      tensor({std::complex<double>(1, 2), std::complex<double>(-1, 0.5)}).to(TensorOptions(kComplex64).device(dev_));
  Tensor g =
      tensor({std::complex<double>(0.5, -1), std::complex<double>(2, 1)}).to(TensorOptions(kComplex64).device(dev_));
  Driven<optim::SGD> sgd({z}, optim::SGDOptions(0.1).momentum(0.5));
  sgd.apply({z}, {g});
  sgd.apply({z}, {g});
  // buf = g, then 1.5 g: z -= 0.1 * 2.5 g
  std::vector<std::complex<float>> got = z.to_vector<std::complex<float>>();
  EXPECT_NEAR(got[0].real(), 1 - 0.25 * 0.5, 1e-6);
  EXPECT_NEAR(got[0].imag(), 2 + 0.25, 1e-6);
  EXPECT_NEAR(got[1].real(), -1 - 0.5, 1e-6);
  EXPECT_NEAR(got[1].imag(), 0.5 - 0.25, 1e-6);
}

EMBER_ON_DEVICES(Optim, "cpu", "cuda:0");

TEST(OptimOptions, InvalidValuesAreValueErrorsWithPyTorchsText) {
  Tensor p = ones({1});
  EXPECT_EQ(error_of<ValueError>([&] { optim::SGD({p}, optim::SGDOptions(-0.1)); }), "Invalid learning rate: -0.1");
  EXPECT_EQ(error_of<ValueError>([&] { optim::SGD({p}, optim::SGDOptions(0.1).momentum(-1.5)); }),
            "Invalid momentum value: -1.5");
  EXPECT_EQ(error_of<ValueError>([&] { optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)); }),
            "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_EQ(error_of<ValueError>([&] {
              optim::Adam({p}, optim::AdamOptions().betas({1.0, 0.9}));
            }),
            "Invalid beta parameter at index 0: 1.0");
  EXPECT_EQ(error_of<ValueError>([&] { optim::Adam({p}, optim::AdamOptions().eps(-1e-8)); }),
            "Invalid epsilon value: -1e-08");
  EXPECT_EQ(error_of<ValueError>([&] { optim::Adam({}, optim::AdamOptions()); }),
            "optimizer got an empty parameter list");
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  EXPECT_EQ(error_of<ValueError>([&] { sgd.add_param_group({p}, optim::SGDOptions(0.2)); }),
            "some parameters appear in more than one parameter group");
  EXPECT_EQ(error_of<TypeError>([&] { optim::SGD({ones({1}, kInt64)}, optim::SGDOptions(0.1)); }),
            "optimizer can only optimize Tensors of floating point or complex dtype, but got int64");
}

TEST(OptimOptions, StepLRFollowsPyTorch) {
  Tensor p = ones({1});
  optim::SGD sgd({p}, optim::SGDOptions(1.0));
  optim::StepLR sched(sgd, /*step_size=*/2, /*gamma=*/0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 5; ++i) {
    sched.step();
    lrs.push_back(sched.get_last_lr()[0]);
  }
  EXPECT_EQ(lrs, (std::vector<double>{1.0, 0.5, 0.5, 0.25, 0.25}));
  EXPECT_EQ(sgd.lr(), 0.25);
}

}  // namespace
}  // namespace ember
