// F::layer_norm: values and gradients against PyTorch 1.13 (transformer_ops_expected.py),
// float64 gradcheck and double backward (gradcheck of the recorded backward), undefined
// weight/bias, non-contiguous input, errors, cuda devices against the cpu.
#include "transformer_test_util.h"

using namespace ember;
using ember::testing::expect_case;
using ember::testing::expect_gradcheck;
using ember::testing::seq;
namespace E = transformer_expected;
namespace F = ember::nn::functional;

namespace {

using Ts = std::vector<Tensor>;

class LayerNorm : public ember::testing::OnDevice {
 protected:
  Tensor R(const IntList& s, double c) { return seq(s, c, dev_).requires_grad_(true); }
};

TEST_P(LayerNorm, ValuesAndGradsMatchPyTorch) {
  expect_case(
      "affine over [3, 4]",
      [](const Ts& x) {
        return F::layer_norm(x[0], {3, 4}, x[1], x[2], 1e-5);
      },
      {{{2, 3, 4}, 0.1}, {{3, 4}, 0.2}, {{3, 4}, 0.3}}, E::kLayerNormAffine, dev_);
  expect_case(
      "plain over [4]", [](const Ts& x) { return F::layer_norm(x[0] * 3, {4}, {}, {}, 1e-3); }, {{{2, 3, 4}, 0.4}},
      E::kLayerNormPlain, dev_);
}

TEST_P(LayerNorm, NodeAndStatistics) {
  Tensor x = R({2, 5}, 0.1);
  Tensor y = F::layer_norm(x, {5});
  EXPECT_EQ(y.grad_fn()->name(), "NativeLayerNormBackward0");
  EXPECT_EQ(y.sizes(), x.sizes());
  // Each row has mean 0 and (biased) variance 1 / (1 + eps / var).
  Tensor mean = y.detach().mean(1);
  EXPECT_LT(mean.abs().max().item<double>(), 1e-12);
  EXPECT_NEAR((y.detach() * y.detach()).mean(1)[0].item<double>(), 1.0, 1e-4);
}

TEST_P(LayerNorm, WeightOrBiasAlone) {
  Tensor x = seq({3, 4}, 0.1, dev_), w = seq({4}, 0.2, dev_), b = seq({4}, 0.3, dev_);
  Tensor plain = F::layer_norm(x, {4});
  EXPECT_TRUE(allclose(F::layer_norm(x, {4}, w), plain * w, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(F::layer_norm(x, {4}, {}, b), plain + b, 1e-12, 1e-12));
  expect_gradcheck("weight only", [](const Ts& v) { return F::layer_norm(v[0], {4}, v[1]); },
                   {R({3, 4}, 0.1), R({4}, 0.2)});
  expect_gradcheck("bias only", [](const Ts& v) { return F::layer_norm(v[0], {4}, {}, v[1]); },
                   {R({3, 4}, 0.1), R({4}, 0.3)});
}

TEST_P(LayerNorm, Gradcheck) {
  expect_gradcheck("layer_norm",
                   [](const Ts& v) {
                     return F::layer_norm(v[0], {2, 3}, v[1], v[2]);
                   },
                   {R({2, 2, 3}, 0.1), R({2, 3}, 0.2), R({2, 3}, 0.3)});
  expect_gradcheck("layer_norm, no affine", [](const Ts& v) { return F::layer_norm(v[0], {3}); }, {R({4, 3}, 0.4)});
}

TEST_P(LayerNorm, DoubleBackward) {
  // gradcheck of the gradients themselves (create_graph): the recorded backward.
  Tensor gy = seq({2, 3}, 0.9, dev_);
  auto layer_norm = [](const Ts& v) { return F::layer_norm(v[0], {3}, v[1], v[2]); };
  expect_gradcheck("layer_norm double backward",
                   [&](const Ts& v) { return ember::testing::recorded_grads(layer_norm, v, gy); },
                   {R({2, 3}, 0.1), R({3}, 0.2), R({3}, 0.3)});
}

TEST_P(LayerNorm, NonContiguousInput) {
  Tensor x = seq({4, 6}, 0.1, dev_).t();  // [6, 4], strided
  Tensor w = seq({8}, 0.2, dev_).narrow(0, 0, 4);
  EXPECT_TRUE(allclose(F::layer_norm(x, {4}, w), F::layer_norm(x.contiguous(), {4}, w.contiguous()), 1e-12, 1e-12));
  Tensor xr = x.detach().requires_grad_(true), xc = x.contiguous().detach().requires_grad_(true);
  F::layer_norm(xr, {4}).pow(2).sum().backward();
  F::layer_norm(xc, {4}).pow(2).sum().backward();
  EXPECT_TRUE(allclose(xr.grad(), xc.grad(), 1e-12, 1e-12));
}

TEST_P(LayerNorm, Errors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor x = zeros({4, 3}, o);
  EXPECT_THROW_MSG(F::layer_norm(x, {4}), ValueError,
                   "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[4, 3]");
  EXPECT_THROW_MSG(F::layer_norm(x, {3}, ones({4}, o)), ValueError,
                   "Expected weight to be of same shape as normalized_shape, but got weight of shape [4] and "
                   "normalized_shape = [3]");
  EXPECT_THROW_MSG(F::layer_norm(x, {3}, ones({3}, o), ones({2}, o)), ValueError,
                   "Expected bias to be of same shape as normalized_shape, but got bias of shape [2] and "
                   "normalized_shape = [3]");
  EXPECT_THROW_MSG(F::layer_norm(x, {}), ValueError, "Expected normalized_shape to be at least 1-dimensional");
  EXPECT_THROW(F::layer_norm(zeros({4, 3}, TensorOptions(kInt64).device(dev_)), {3}), TypeError);
  EXPECT_THROW(F::layer_norm(x, {3}, ones({3}, TensorOptions(kFloat64).device(dev_))), TypeError);
}

EMBER_ON_DEVICES(LayerNorm, "cpu", "cuda:0");

TEST(LayerNormDevices, CudaEqualsCpu) {
  EMBER_REQUIRE_DEVICES(1);
  Device d("cuda:0");
  for (DType dtype : {kFloat32, kFloat64}) {
    auto run = [&](Device dev) {
      Tensor x = (seq({8, 33}, 0.1, dev, dtype) * 4).detach().requires_grad_(true);
      Tensor w = seq({33}, 0.2, dev, dtype).requires_grad_(true), b = seq({33}, 0.3, dev, dtype).requires_grad_(true);
      Tensor y = F::layer_norm(x, {33}, w, b);
      (y * seq({8, 33}, 0.5, dev, dtype)).sum().backward();
      return Ts{y.detach().to(Device(kCPU)), x.grad().to(Device(kCPU)), w.grad().to(Device(kCPU)),
                b.grad().to(Device(kCPU))};
    };
    Ts cpu = run(Device(kCPU)), cuda = run(d);
    for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(allclose(cpu[i], cuda[i], 1e-5, 1e-6)) << dtype << " " << i;
  }
}

}  // namespace
