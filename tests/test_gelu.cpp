// F::gelu, exact and tanh-approximated: values and gradients against PyTorch 1.13
// (transformer_ops_expected.py), float64 gradcheck, double backward of both forms,
// non-contiguous input, float32, errors, cuda devices against the cpu.
#include "transformer_test_util.h"

using namespace ember;
using ember::testing::expect_gradcheck;
using ember::testing::expect_values;
using ember::testing::seq;
namespace E = transformer_expected;
namespace F = ember::nn::functional;

namespace {

using Ts = std::vector<Tensor>;

class Gelu : public ember::testing::OnDevice {};

TEST_P(Gelu, ValuesAndGradsMatchPyTorch) {
  for (const char* approximate : {"none", "tanh"}) {
    const bool tanh = std::string(approximate) == "tanh";
    Tensor x = (seq({7}, 0.1, dev_) * 3).detach().requires_grad_(true);
    Tensor y = F::gelu(x, approximate);
    EXPECT_EQ(y.grad_fn()->name(), "GeluBackward0");
    (y * seq({7}, 0.5, dev_)).sum().backward();
    if (tanh) {
      expect_values("gelu tanh", y, E::kGeluTanhOut, 1e-12);
      expect_values("gelu tanh grad", x.grad(), E::kGeluTanhGrad, 1e-12);
    } else {
      expect_values("gelu", y, E::kGeluNoneOut, 1e-12);
      expect_values("gelu grad", x.grad(), E::kGeluNoneGrad, 1e-12);
    }
  }
}

TEST_P(Gelu, Float32AndNonContiguous) {
  Tensor x = (seq({4, 6}, 0.2, dev_) * 3).t();  // strided
  Tensor y32 = F::gelu(x.to(kFloat32));
  EXPECT_EQ(y32.dtype(), kFloat32);
  EXPECT_TRUE(allclose(y32.to(kFloat64), F::gelu(x), 1e-6, 1e-6));
  EXPECT_TRUE(equal(F::gelu(x, "tanh"), F::gelu(x.contiguous(), "tanh")));
}

TEST_P(Gelu, Gradcheck) {
  Tensor x = (seq({2, 5}, 0.3, dev_) * 3).detach().requires_grad_(true);
  expect_gradcheck("gelu", [](const Ts& v) { return F::gelu(v[0]); }, {x});
  expect_gradcheck("gelu tanh", [](const Ts& v) { return F::gelu(v[0], "tanh"); }, {x});
  Tensor gy = seq({2, 5}, 0.9, dev_);
  auto gelu_tanh = [](const Ts& v) { return F::gelu(v[0], "tanh"); };
  auto gelu_none = [](const Ts& v) { return F::gelu(v[0]); };
  expect_gradcheck("gelu tanh double backward",
                   [&](const Ts& v) { return ember::testing::recorded_grads(gelu_tanh, v, gy); }, {x});
  expect_gradcheck("gelu double backward",
                   [&](const Ts& v) { return ember::testing::recorded_grads(gelu_none, v, gy); }, {x});
  // The recorded backward is PyTorch's node, differentiable in both of its inputs.
  Tensor y = F::gelu(x);
  Tensor gx = autograd::grad({y}, {x}, {gy.clone().requires_grad_(true)}, std::nullopt, true)[0];
  EXPECT_EQ(gx.grad_fn()->name(), "GeluBackwardBackward0");
  Tensor g_out = gy.clone().requires_grad_(true);
  expect_gradcheck("gelu backward w.r.t. its gradient",
                   [&](const Ts& v) {
                     AutoGradMode enable(true);
                     Tensor leaf = x.detach().requires_grad_(true);
                     return autograd::grad({F::gelu(leaf)}, {leaf}, {v[0]}, std::nullopt, true)[0];
                   },
                   {g_out});
}

TEST_P(Gelu, Errors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  EXPECT_THROW_MSG(F::gelu(ones({2}, o), "foo"), ValueError, "approximate argument must be either none or tanh.");
  EXPECT_THROW_MSG(F::gelu(ones({2}, TensorOptions(kInt64).device(dev_))), TypeError,
                   "\"GeluKernelImpl\" not implemented for 'Long'");
}

EMBER_ON_DEVICES(Gelu, "cpu", "cuda:0");

TEST(GeluDevices, CudaEqualsCpu) {
  EMBER_REQUIRE_DEVICES(1);
  for (const char* approximate : {"none", "tanh"}) {
    Tensor x = seq({1000}, 0.1, Device(kCPU), kFloat32) * 5;
    Tensor g = seq({1000}, 0.7, Device(kCPU), kFloat32);
    Tensor xc = x.to(Device("cuda:0")).requires_grad_(true), xh = x.clone().requires_grad_(true);
    Tensor yc = F::gelu(xc, approximate), yh = F::gelu(xh, approximate);
    (yc * g.to(Device("cuda:0"))).sum().backward();
    (yh * g).sum().backward();
    EXPECT_TRUE(allclose(yc.to(Device(kCPU)), yh, 1e-6, 1e-6)) << approximate;
    EXPECT_TRUE(allclose(xc.grad().to(Device(kCPU)), xh.grad(), 1e-6, 1e-6)) << approximate;
  }
}

}  // namespace
