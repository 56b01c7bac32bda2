// rsqrt and erf (rows of the unary op list): values against PyTorch 1.13's (the numbers
// below come from /usr/bin/python3, torch 1.13), dtypes, errors, gradients.
#include "ops_on_devices.h"

using namespace ember;
using ember::testing::expect_values;

namespace {

class RsqrtErf : public ember::testing::OpsOnDevice {};

TEST_P(RsqrtErf, RsqrtMatchesPyTorch) {
  Tensor x = T({0.25, 1.0, 2.5, 9.0});
  expect_values(rsqrt(x), {2.0, 1.0, 0.6324555320336759, 0.3333333333333333});
  expect_values(x.rsqrt(), {2.0, 1.0, 0.6324555320336759, 0.3333333333333333});
  // Integers promote to the default dtype; 0 and negatives give inf and NaN.
  Tensor i = rsqrt(T({4, 16}, kInt64));
  EXPECT_EQ(i.dtype(), kFloat32);
  expect_values(i, {0.5, 0.25});
  expect_values(rsqrt(T({0.0, -1.0}, kFloat32)), {INFINITY, NAN});
  expect_values(rsqrt(T({{4.0, 1.0}}, kComplex128)).abs(), {0.5, 1.0});
}

TEST_P(RsqrtErf, ErfMatchesPyTorch) {
  Tensor x = T({-2.0, -0.5, 0.0, 0.3, 1.7});
  expect_values(erf(x), {-0.9953222650189527, -0.5204998778130465, 0.0, 0.3286267594591274, 0.9837904585907745});
  expect_values(x.to(kFloat32).erf(),
                {-0.9953222870826721, -0.5204998850822449, 0.0, 0.3286267817020416, 0.9837904572486877}, 1e-6);
  EXPECT_EQ(erf(T({1}, kInt32)).dtype(), kFloat32);
  EXPECT_THROW_MSG(erf(T({1.0}, kComplex64)), TypeError, "\"erf\" not implemented for 'ComplexFloat'");
}

// atan2, a row of the binary op list (Note [Declaring a binary op]): values, broadcasting,
// integer promotion and the refusal of complex inputs as PyTorch 1.13's; float16 and bfloat16
// computed in float32 (PyTorch 2.x's cpu has them, 1.13's refuses float16).
TEST_P(RsqrtErf, Atan2MatchesPyTorch) {
  Tensor a = T({{1.0, -2.0, 0.0}, {3.5, -0.5, 0.0}}, kFloat32), b = T({2.0, -1.0, 0.0}, kFloat32);
  expect_values(atan2(a, b),
                {0.46364760398864746, -2.0344438552856445, 0.0, 1.0516501665115356, -2.677945137023926, 0.0}, 1e-6);
  Tensor i = atan2(T({1, 2}, kInt64), T({3, -4}, kInt64));
  EXPECT_EQ(i.dtype(), kFloat32);
  expect_values(i, {0.32175055146217346, 2.677945137023926}, 1e-6);
  Tensor h = atan2(T({1.0}, kBFloat16), T({3.0}, kBFloat16));
  EXPECT_EQ(h.dtype(), kBFloat16);
  expect_values(h, {0.322265625});
  EXPECT_EQ(atan2(T({1.0}, kFloat16), T({3.0}, kFloat16)).dtype(), kFloat16);
  const char* where = dev_.is_cuda() ? "\"atan2_cuda\"" : "\"atan2_cpu\"";
  EXPECT_THROW_MSG(atan2(T({1.0}, kComplex64), T({1.0}, kComplex64)), TypeError,
                   std::string(where) + " not implemented for 'ComplexFloat'");
  using Ts = std::vector<Tensor>;
  Tensor x = T({0.7, 1.2}).requires_grad_(true), y = T({0.9, -0.4}).requires_grad_(true);
  Tensor z = atan2(x, y);
  EXPECT_EQ(z.grad_fn()->name(), "Atan2Backward0");
  z.sum().backward();
  expect_values(x.grad(), {0.6923076923076923, -0.25});
  expect_values(y.grad(), {-0.5384615384615383, -0.75});
  gradcheck("atan2", [](const Ts& v) { return Ts{atan2(v[0], v[1])}; }, {R({2, 3}), R({3})});
}

TEST_P(RsqrtErf, NonContiguousAndEmpty) {
  Tensor x = (T({{1.0, 4.0, 9.0}, {16.0, 25.0, 36.0}})).t();
  expect_values(rsqrt(x), {1.0, 0.25, 0.5, 0.2, 1.0 / 3, 1.0 / 6});
  EXPECT_EQ(erf(T({1.0}).narrow(0, 0, 0)).numel(), 0);
}

TEST_P(RsqrtErf, Gradients) {
  using Ts = std::vector<Tensor>;
  Tensor positive = (rand({2, 3}, TensorOptions(kFloat64).device(dev_)) + 0.5).requires_grad_(true);
  gradcheck("rsqrt", [](const Ts& x) { return Ts{rsqrt(x[0])}; }, {positive});
  gradcheck("erf", [](const Ts& x) { return Ts{erf(x[0])}; }, {R({2, 3})});
  Tensor x = T({0.5}).requires_grad_(true);
  erf(x).backward();
  expect_values(x.grad(), {0.8787825789354448});  // 2/sqrt(pi) exp(-0.25)
  EXPECT_EQ(erf(x).grad_fn()->name(), "ErfBackward0");
  EXPECT_EQ(rsqrt(x).grad_fn()->name(), "RsqrtBackward0");
}

EMBER_ON_DEVICES(RsqrtErf, "cpu", "cuda:0");

}  // namespace
