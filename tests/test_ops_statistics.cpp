// cumsum, sum and mean over dims, logsumexp, var and std: values against PyTorch 1.13's (the numbers below come from
// /usr/bin/python3, torch 1.13), dims lists (negative, several, empty = all), keepdim,
// correction 0 and 1, dtypes, numerically hard inputs, errors, gradients, and the device
// equal to the cpu.
#include <limits>

#include "ops_on_devices.h"

using namespace ember;
using ember::testing::expect_ints;
using ember::testing::expect_values;

namespace {

class ScanStatistics : public ember::testing::OpsOnDevice {
 protected:
  Tensor x() const { return T({{0.5, -1.25, 2.0, 3.5}, {1.5, 0.25, -2.0, 4.0}, {-0.75, 1.0, 0.5, -3.0}}); }
};

TEST_P(ScanStatistics, CumsumMatchesPyTorch) {
  expect_values(cumsum(x(), 0), {0.5, -1.25, 2.0, 3.5, 2.0, -1.0, 0.0, 7.5, 1.25, 0.0, 0.5, 4.5});
  expect_values(x().cumsum(-1), {0.5, -0.75, 1.25, 4.75, 1.5, 1.75, -0.25, 3.75, -0.75, 0.25, 0.75, -2.25});
  expect_values(x().t().cumsum(1), {0.5, 2.0, 1.25, -1.25, -1.0, 0.0, 2.0, 0.0, 0.5, 3.5, 7.5, 4.5});
  Tensor i = T({{1, 2, 3}, {4, 5, 6}}, kInt32).cumsum(1);
  EXPECT_EQ(i.dtype(), kInt64);  // integers accumulate in int64, as PyTorch
  expect_ints(i, {1, 3, 6, 4, 9, 15});
  Tensor b = T({true, false, true}, kBool).cumsum(0);
  EXPECT_EQ(b.dtype(), kInt64);
  expect_ints(b, {1, 1, 2});
  EXPECT_EQ(T(2.5).cumsum(0).item<double>(), 2.5);
  EXPECT_EQ(x().narrow(1, 0, 0).cumsum(1).sizes(), (IntList{3, 0}));
  EXPECT_THROW_MSG(x().cumsum(2), IndexError, "Dimension out of range");
  EXPECT_THROW_MSG(T({1.0}, kComplex64).cumsum(0), TypeError, "\"cumsum\" not implemented for 'ComplexFloat'");
}

TEST_P(ScanStatistics, LogsumexpMatchesPyTorch) {
  expect_values(logsumexp(x(), {1}), {3.7480850490038047, 4.102630138559354, 1.5870198387726626});
  expect_values(x().logsumexp({0, 1}), {4.680538205687761});
  expect_values(x().logsumexp({}), {4.680538205687761});  // every dim
  Tensor kept = x().logsumexp({-2}, /*keepdim=*/true);
  EXPECT_EQ(kept.sizes(), (IntList{1, 4}));
  expect_values(kept, {1.8874903020271998, 1.4560097813072754, 2.216276667370826, 4.474644432589215});
  // No overflow or underflow; infinite maxima as PyTorch.
  expect_values(T({1000.0, 1000.0, -1000.0}).logsumexp({0}), {1000.6931471805599});
  const double inf = std::numeric_limits<double>::infinity();
  expect_values(T({{-inf, -inf}, {inf, 1.0}}).logsumexp({1}), {-inf, inf});
  Tensor i = T({1, 2}, kInt64).logsumexp({0});
  EXPECT_EQ(i.dtype(), kFloat32);
  expect_values(i, {2.3132617473602295}, 1e-6);
  expect_values(x().narrow(1, 0, 0).logsumexp({1}), {-inf, -inf, -inf});
  EXPECT_THROW_MSG(x().logsumexp({1, -1}), ValueError, "dim 1 appears multiple times in the list of dims");
}

// The LogSumExp kernel's paths (numbers from /usr/bin/python3, torch 1.13): float32 rows
// in vector lanes with a tail, lines across rows (a non-unit stride along the dim), several
// dims not next to each other, NaN, the reduced floating dtypes, 0-dim and empty inputs.
TEST_P(ScanStatistics, LogsumexpKernelPaths) {
  Tensor rows = T({{-5.49, -1.22, 3.05, -4.27, 0.0, 4.27, -3.05, 1.22, 5.49, -1.83, 2.44, -4.88, -0.61, 3.66, -3.66,
                    0.61, 4.88, -2.44, 1.83},
                   {-4.44, -2.59, -0.74, 1.11, -4.07, -2.22, -0.37, 1.48, -3.7, -1.85, 0.0, 1.85, -3.33, -1.48, 0.37,
                    2.22, -2.96, -1.11, 0.74}},
                  kFloat32);
  Tensor dense = rows.logsumexp({1});
  EXPECT_EQ(dense.dtype(), kFloat32);
  expect_values(dense, {6.273830413818359, 3.392669200897217}, 1e-6);
  expect_values(rows.logsumexp({0}).narrow(0, 0, 3), {-4.139941215515137, -0.9935762882232666, 3.0723440647125244},
                1e-6);
  expect_values(rows.t().logsumexp({1}).narrow(0, 0, 3), {-4.139941215515137, -0.9935762882232666, 3.0723440647125244},
                1e-6);
  expect_values(x().to(kFloat32).t().logsumexp({0}), {3.7480850219726562, 4.102630138397217, 1.587019920349121}, 1e-6);
  expect_values(T(std::vector<double>(1000, 1000.0), kFloat32).logsumexp({0}), {1006.90777587890625}, 1e-6);
  Tensor a = arange(24, TensorOptions(kFloat64).device(dev_)).reshape({2, 3, 4}) * 0.25 - 2;
  expect_values(a.logsumexp({0, 2}), {2.848603755632692, 3.848603755632692, 4.848603755632692});
  Tensor kept = a.to(kFloat32).logsumexp({2, 0}, /*keepdim=*/true);
  EXPECT_EQ(kept.sizes(), (IntList{1, 3, 1}));
  expect_values(kept, {2.8486037254333496, 3.8486037254333496, 4.84860372543335}, 1e-6);
  const double inf = std::numeric_limits<double>::infinity();
  for (DType d : {kFloat32, kFloat64}) {
    Tensor w = T({{1.0, NAN, 2.0}, {inf, -inf, 0.0}, {-inf, -inf, -inf}}, d);
    expect_values(w.logsumexp({1}), {NAN, inf, -inf});
    expect_values(w.t().logsumexp({0}), {NAN, inf, -inf});
  }
  // PyTorch 1.13 has no float16 logsumexp on the cpu: the float32 result rounded to float16.
  Tensor h = T({0.5, -1.25, 2.0, 3.5}, kFloat16).logsumexp({0});
  EXPECT_EQ(h.dtype(), kFloat16);
  expect_values(h, {3.748046875});
  expect_values(T({0.5, -1.25, 2.0, 3.5}, kBFloat16).logsumexp({0}), {3.75});
  expect_values(T(2.5).logsumexp({0}), {2.5});
  expect_values(T(2.5).logsumexp({}), {2.5});
  EXPECT_EQ(T(2.5).logsumexp({0}).dim(), 0);
  EXPECT_EQ(zeros({0, 3}, TensorOptions().device(dev_)).logsumexp({1}).sizes(), (IntList{0}));
  expect_values(zeros({3, 0}, TensorOptions().device(dev_)).logsumexp({0, 1}), {-inf});
  EXPECT_THROW_MSG(T({1.0}, kComplex64).logsumexp({0}), TypeError,
                   "logsumexp(): Expected floating point type for result tensor, but got: ComplexFloat");
  EXPECT_THROW_MSG(x().logsumexp({2}), IndexError, "Dimension out of range");
}

TEST_P(ScanStatistics, VarAndStdMatchPyTorch) {
  expect_values(var(x(), {1}), {4.140625, 6.265625, 3.1822916666666665});
  expect_values(x().var({0}, /*correction=*/0), {0.8472222222222222, 0.875, 2.722222222222222, 10.166666666666666});
  expect_values(x().var(), {4.357481060606061});
  expect_values(x().var({}, 0), {3.9943576388888893});
  expect_values(x().var({0, 1}), {4.357481060606061});
  Tensor kept = x().var({-1}, 1, /*keepdim=*/true);
  EXPECT_EQ(kept.sizes(), (IntList{3, 1}));
  expect_values(kept, {4.140625, 6.265625, 3.1822916666666665});
  expect_values(ember::std(x(), {1}), {2.0348525745124633, 2.5031230493125984, 1.7838978857173038});
  expect_values(x().std({0}, 0), {0.9204467514322717, 0.9354143466934853, 1.6499158227686108, 3.1885210782848317});
  expect_values(x().std(), {2.0874580380467678});
  expect_values(x().t().var({0}), {4.140625, 6.265625, 3.1822916666666665});  // non-contiguous
  // Two passes: a large common offset costs no precision (float32: 1.6666666269302368).
  expect_values(T({1e6 + 1, 1e6 + 2, 1e6 + 3, 1e6 + 4}, kFloat32).var(), {1.6666666269302368}, 1e-7);
  expect_values(T({1.0}).var({0}), {NAN});  // N - correction = 0
  EXPECT_THROW_MSG(T({1, 2}, kInt64).var(), TypeError, "std and var only support floating point");
}

// sum and mean over a list of dims, in one launch (numbers from /usr/bin/python3, torch 1.13).
TEST_P(ScanStatistics, SumAndMeanOverDimsMatchPyTorch) {
  expect_values(x().sum({0, 1}), {6.25});
  expect_values(sum(x(), {1, 0}), {6.25});
  EXPECT_EQ(x().sum({0, 1}, /*keepdim=*/true).sizes(), (IntList{1, 1}));
  expect_values(x().mean({-1}), {1.1875, 0.9375, -0.5625});
  Tensor y = (arange(24, TensorOptions(kFloat64).device(dev_)) * 0.5 - 3).reshape({2, 3, 4});
  expect_values(y.sum({0, 2}), {6.0, 22.0, 38.0});  // dims not next to each other
  expect_values(y.sum({-1, 0}), {6.0, 22.0, 38.0});
  expect_values(y.transpose(0, 2).sum({0, 2}), {6.0, 22.0, 38.0});  // non-contiguous
  Tensor m = y.mean({0, 2}, /*keepdim=*/true);
  EXPECT_EQ(m.sizes(), (IntList{1, 3, 1}));
  expect_values(m, {0.75, 2.75, 4.75});
  expect_values(y.sum(IntList{}), {66.0});  // every dim (a bare {} would pick sum(int64_t dim))
  // One rounding: float16 {{2048, 1}, {1, 0}} sums to 2050 at once; dim by dim, 2049 rounds
  // to 2048 twice (torch: h.sum((0, 1)) is 2050, h.sum(1).sum(0) 2048).
  Tensor h = T({{2048, 1}, {1, 0}}, kFloat16);
  expect_values(h.sum({0, 1}), {2050});
  expect_values(h.sum(1).sum(0), {2048});
  Tensor wide = h.sum({0, 1}, false, kFloat32);
  EXPECT_EQ(wide.dtype(), kFloat32);
  expect_values(wide, {2050});
  Tensor i = T({{1, 2}, {3, 4}}, kInt32);
  EXPECT_EQ(i.sum({0, 1}).dtype(), kInt64);
  expect_ints(i.sum({0, 1}), {10});
  EXPECT_EQ(i.sum({0, 1}, false, kFloat32).dtype(), kFloat32);
  expect_values(i.mean({0}, false, kFloat64), {2, 3});
  EXPECT_EQ(x().sum({0}, false, kFloat16).dtype(), kFloat16);  // narrower: cast first, as PyTorch
  // dtype=float64 adds in double, as PyTorch's sum of the cast input: 2^24 and 1024 ones in float32
  // (torch: 16778240.0; float partial sums would lose the ones).
  Tensor ones_after = cat({T({16777216.0}, kFloat32), ones({1024}, TensorOptions(kFloat32).device(dev_))}, 0);
  expect_values(ones_after.sum({0}, false, kFloat64), {16778240.0});
  expect_values(ones_after.to(kBFloat16).sum({0}, false, kFloat64), {16778240.0});
  // More than 64 dims: every dim at once is fine (no list of dims to encode), a list is refused.
  IntList many(65, 1);
  many[0] = 3;
  Tensor deep = ones(many, TensorOptions(kFloat32).device(dev_));
  expect_values(deep.sum(IntList{}), {3.0});
  expect_values(deep.var(), {0.0});
  EXPECT_THROW_MSG(deep.sum({0, 1}), ValueError, "only tensors with up to 64 dims are supported");
  // Empty and 0-dim inputs.
  Tensor e = zeros({3, 0, 2}, TensorOptions(kFloat32).device(dev_));
  expect_values(e.sum({0, 1}), {0, 0});
  expect_values(e.sum(IntList{1}), {0, 0, 0, 0, 0, 0});
  expect_values(e.mean({0, 1}), {NAN, NAN});
  expect_values(T(2.5).sum(IntList{}), {2.5});
  expect_values(T(2.5).sum(IntList{0}), {2.5});
  EXPECT_THROW_MSG(i.mean(IntList{0}), TypeError,
                   "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
                   "dtype. Got: Int");
  EXPECT_THROW_MSG(i.mean(0), TypeError, "Got: Int");  // the single-dim overload says the same
  EXPECT_THROW_MSG(x().sum({0, 0}), ValueError, "dim 0 appears multiple times in the list of dims");
  EXPECT_THROW_MSG(x().sum({0, 2}), IndexError,
                   "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

// A float16 gradient summed over broadcast dims, or a convolution's bias gradient, is rounded
// once (torch 1.13: b = zeros(2, half), (zeros(2, 2, 2, half) + b).backward(g) gives 2050 and
// 2 for this g; a half conv's bias gradient is the same sum over the batch and positions).
TEST_P(ScanStatistics, Float16GradientSumsRoundOnce) {
  Tensor g = T({{{2048, 0.5}, {1, 0.5}}, {{1, 0.5}, {0, 0.5}}}, kFloat16);
  Tensor b = T({0, 0}, kFloat16).requires_grad_(true);
  (T({{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}}, kFloat16) + b).backward(g);
  expect_values(b.grad(), {2050, 2});
  // conv1d: input {2, 1, 2}, a 1x1 kernel, bias {1}; g {2, 1, 2} over (n, position).
  Tensor bias = T({0}, kFloat16).requires_grad_(true);
  Tensor out = conv1d(T({{{0, 0}}, {{0, 0}}}, kFloat16), T({{{1}}}, kFloat16), bias);
  out.backward(T({{{2048, 1}}, {{1, 0}}}, kFloat16));
  expect_values(bias.grad(), {2050});
}

// var and std have no autocast row: under autocast their inner sums do not widen a float16
// input, so the result stays float16, as PyTorch's.
TEST_P(ScanStatistics, VarUnderAutocastKeepsItsDtype) {
  Tensor h = T({1.0, 2.0, 4.0}, kFloat16);
  ember::autocast guard(dev_.is_cuda() ? kCUDA : kCPU, kFloat16);
  EXPECT_EQ(h.var().dtype(), kFloat16);
  EXPECT_EQ(h.std({0}).dtype(), kFloat16);
  expect_values(h.var(), {2.333984375});
  EXPECT_EQ(h.sum({0}).dtype(), dev_.is_cuda() ? kFloat32 : kFloat16);  // sum's row: float32 on cuda
}

TEST_P(ScanStatistics, DeviceEqualsCpu) {
  Tensor r = randn({6, 33, 5}, TensorOptions(kFloat32).device(dev_));
  Tensor c = r.cpu();
  EXPECT_TRUE(r.cumsum(1).cpu().equal(c.cumsum(1)));
  EXPECT_TRUE(r.to(kInt32).cumsum(0).cpu().equal(c.to(kInt32).cumsum(0)));
  EXPECT_TRUE(r.logsumexp({0, 2}).cpu().allclose(c.logsumexp({0, 2}), 1e-6, 1e-6));
  EXPECT_TRUE(r.logsumexp({1}).cpu().allclose(c.logsumexp({1}), 1e-6, 1e-6));
  EXPECT_TRUE(r.logsumexp({2}).cpu().allclose(c.logsumexp({2}), 1e-6, 1e-6));
  EXPECT_TRUE(r.var({1}, 0).cpu().allclose(c.var({1}, 0), 1e-6, 1e-6));
  EXPECT_TRUE(r.sum({0, 2}).cpu().allclose(c.sum({0, 2}), 1e-6, 1e-6));
  EXPECT_TRUE(r.mean({0, 1}, true).cpu().allclose(c.mean({0, 1}, true), 1e-6, 1e-6));
  EXPECT_TRUE(r.to(kFloat16)
                  .sum({0, 2}, false, kFloat32)
                  .cpu()
                  .allclose(c.to(kFloat16).sum({0, 2}, false, kFloat32), 1e-6, 1e-6));
}

TEST_P(ScanStatistics, Gradients) {
  using Ts = std::vector<Tensor>;
  gradcheck("cumsum", [](const Ts& a) { return Ts{a[0].cumsum(1)}; }, {R({3, 4})});
  gradcheck("cumsum dim 0", [](const Ts& a) { return Ts{cumsum(a[0], 0)}; }, {R({3, 4})});
  gradcheck("logsumexp", [](const Ts& a) { return Ts{a[0].logsumexp({1})}; }, {R({3, 4})});
  gradcheck("logsumexp keepdim", [](const Ts& a) { return Ts{a[0].logsumexp({0, 2}, true)}; }, {R({2, 3, 2})});
  gradcheck("var", [](const Ts& a) { return Ts{a[0].var({1})}; }, {R({3, 4})});
  gradcheck("var all, correction 0", [](const Ts& a) { return Ts{a[0].var({}, 0)}; }, {R({3, 4})});
  gradcheck("var keepdim", [](const Ts& a) { return Ts{a[0].var({-1, 0}, 1, true)}; }, {R({2, 3, 2})});
  gradcheck("sum dims", [](const Ts& a) { return Ts{a[0].sum({0, 2})}; }, {R({2, 3, 2})});
  gradcheck("mean dims keepdim", [](const Ts& a) { return Ts{a[0].mean({-1, 0}, true)}; }, {R({2, 3, 2})});
  gradcheck("std", [](const Ts& a) { return Ts{a[0].std({0})}; }, {R({3, 4})});
  gradcheck("std correction 0 keepdim", [](const Ts& a) { return Ts{a[0].std({1}, 0, true)}; }, {R({3, 4})});
  Tensor a = x().requires_grad_(true);
  EXPECT_EQ(a.cumsum(0).grad_fn()->name(), "CumsumBackward0");
  EXPECT_EQ(a.logsumexp({0}).grad_fn()->name(), "LogsumexpBackward0");
  EXPECT_EQ(a.var().grad_fn()->name(), "VarBackward0");
  EXPECT_EQ(a.sum({0, 1}).grad_fn()->name(), "SumBackward1");
  EXPECT_EQ(a.mean({0}).grad_fn()->name(), "MeanBackward1");
  // dtype=: the gradient comes back in the input's dtype.
  Tensor hf = T({1, 2, 3}, kFloat16).requires_grad_(true);
  hf.sum({0}, false, kFloat32).backward();
  EXPECT_EQ(hf.grad().dtype(), kFloat16);
  expect_values(hf.grad(), {1, 1, 1});
  EXPECT_EQ(a.std().grad_fn()->name(), "StdBackward0");
  a.cumsum(1).sum().backward();
  expect_values(a.grad(), {4, 3, 2, 1, 4, 3, 2, 1, 4, 3, 2, 1});
  // std's gradient is 0 where std is 0 (PyTorch's std_backward).
  Tensor constant = T({2.0, 2.0, 2.0}).requires_grad_(true);
  constant.std().backward();
  expect_values(constant.grad(), {0, 0, 0});
}

EMBER_ON_DEVICES(ScanStatistics, "cpu", "cuda:0");

}  // namespace
