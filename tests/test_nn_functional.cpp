// ember::nn::functional (forward) on cpu and on a cuda device: pooling, losses, batch
// norm, dropout, linear, one_hot. Expected values were computed with PyTorch 1.13
// (Debian's python3-torch, torch.nn.functional) on the same inputs; error messages are
// PyTorch's.
#include <cmath>

#include "test_support.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

using Floats = std::vector<float>;
using Longs = std::vector<int64_t>;

class NnFunctional : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, DType dtype = kFloat32) { return tensor(d, TensorOptions(dtype).device(dev_)); }
  // PyTorch's (arange(100) * 37 % 23 - 11) * 0.25 as (2, 2, 5, 5).
  Tensor pool_input() {
    std::vector<double> v(100);
    for (int i = 0; i < 100; ++i) v[i] = ((i * 37) % 23 - 11) * 0.25;
    return T(TensorData(v)).reshape({2, 2, 5, 5});
  }
  Tensor logits() { return T({{1.5, -0.5, 2.0, 0.25}, {0.0, 3.0, -1.0, 1.0}, {2.5, 2.5, -2.0, 0.5}}); }
  static Longs I(const Tensor& t) { return t.to_vector<int64_t>(); }
  static void expect_near(const Tensor& t, const Floats& expected, float tol = 2e-6f) {
    Floats got = t.to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol * (1 + std::fabs(expected[i]))) << i;
  }
};

TEST_P(NnFunctional, MaxPool2dValuesAndIndices) {
  Tensor x = pool_input();
  auto [v2, i2] = F::max_pool2d_with_indices(x, {2});
  EXPECT_EQ(v2.sizes(), (IntList{2, 2, 2, 2}));
  EXPECT_EQ(v2.device(), dev_);
  expect_near(v2, {1.0, 2.25, 1.5, 2.75, 2.25, 0.0, 2.75, 0.5, 0.0, 1.25, 0.5, 1.75, 1.25, 2.5, 1.75, 2.75});
  EXPECT_EQ(I(i2), (Longs{6, 8, 16, 18, 6, 7, 16, 17, 5, 7, 15, 17, 5, 7, 15, 12}));
  auto [v3, i3] = F::max_pool2d_with_indices(x, {3}, {2}, {1});
  expect_near(
      v3, {1.0, 2.25, 2.25, 1.5, 2.75, 2.75, 1.75, 2.75, 2.75,  2.25, 2.25, 1.25, 2.75, 2.75, 1.75, 2.75, 2.75, 2.0,
           0.0, 1.25, 2.5,  0.5, 1.75, 2.75, 0.75, 2.0,  -0.25, 1.25, 2.5,  0.25, 1.75, 2.75, 0.75, 2.0,  1.0,  1.0});
  EXPECT_EQ(I(i3), (Longs{6, 8, 8, 16, 18, 18, 21, 18, 18, 6, 6, 9, 16, 16, 19, 16, 16, 24,
                          5, 7, 9, 15, 17, 14, 20, 22, 23, 5, 7, 8, 15, 12, 18, 20, 23, 23}));
  // Rectangular kernel, stride, padding, dilation and ceil_mode together; non-contiguous input.
  Tensor xt = x.transpose(2, 3).contiguous().transpose(2, 3);
  auto [vd, id] = F::max_pool2d_with_indices(xt, {2, 3}, {1, 2}, {1, 1}, {2}, true);
  EXPECT_EQ(vd.sizes(), (IntList{2, 2, 5, 2}));
  expect_near(vd, {2.25, 2.25, 2.5,  2.5,  2.75, 2.75, 2.5,  2.5,  2.75,  2.75,  2.25, 2.25, 2.5,   2.5,
                   2.75, 2.75, 2.5,  2.5,  2.75, 2.75, -1.0, -1.0, -0.75, -0.75, -0.5, -0.5, -0.25, -0.25,
                   -0.5, -0.5, 0.25, 0.25, 0.5,  0.5,  0.75, 0.75, 1.0,   1.0,   0.75, 0.75});
  EXPECT_EQ(I(id), (Longs{8, 8, 13, 13, 18, 18, 13, 13, 18, 18, 6, 6, 11, 11, 16, 16, 11, 11, 16, 16,
                          8, 8, 13, 13, 18, 18, 23, 23, 18, 18, 8, 8, 13, 13, 18, 18, 23, 23, 18, 18}));
  // Unbatched (C, H, W) input; the plain form returns the values.
  EXPECT_EQ(F::max_pool2d(x.select(0, 1), {2}).to_vector<float>(), v2.select(0, 1).to_vector<float>());
}

TEST_P(NnFunctional, AvgPool2d) {
  Tensor x = pool_input();
  expect_near(F::avg_pool2d(x, {2}), {-0.875, 0.375, -0.375, 0.875, 0.375, -1.25, 0.875, -0.75, -1.25, 0.0, -0.75, 0.5,
                                      0.0, 1.25, 0.5, 0.3125});
  expect_near(F::avg_pool2d(x, {3}, {2}, {1}),
              {-0.3888889,  0.3611111,   0.44444445,  -0.33333334, 0.91666669, 0.91666669,  -0.05555556, 0.22222222,
               0.1388889,   0.16666667,  -0.08333334, -0.27777779, 0.5,        0.25,        -0.16666667, -0.1388889,
               -0.22222222, 0.05555556,  -0.55555558, -0.52777779, 0.27777779, -0.58333331, -0.41666666, 0.02777778,
               -0.22222222, -0.02777778, -0.66666669, 0.0,         0.30555555, -0.44444445, 0.25,        0.19444445,
               -0.41666666, 0.33333334,  -0.47222221, -0.11111111});
  expect_near(F::avg_pool2d(x, {3}, {2}, {1}, false, /*count_include_pad=*/false),
              {-0.875, 0.54166669,  1.0,    -0.5,   0.91666669,  1.375,      -0.125,  0.33333334,  0.3125,
               0.375,  -0.125,      -0.625, 0.75,   0.25,        -0.25,      -0.3125, -0.33333334, 0.125,
               -1.25,  -0.79166669, 0.625,  -0.875, -0.41666666, 0.04166667, -0.5,    -0.04166667, -1.5,
               0.0,    0.45833334,  -1.0,   0.375,  0.19444445,  -0.625,     0.75,    -0.70833331, -0.25});
  EXPECT_EQ(F::avg_pool2d(x, {3}, {2}, {1}, /*ceil_mode=*/true).sizes(), (IntList{2, 2, 3, 3}));
  expect_near(F::avg_pool2d(x, {2}, {}, {0}, false, true, 3),
              {-1.16666663, 0.5, -0.5, 1.16666663, 0.5, -1.66666663, 1.16666663, -1.0, -1.66666663, 0.0, -1.0,
               0.66666669, 0.0, 1.66666663, 0.66666669, 0.41666666});
}

TEST_P(NnFunctional, PoolingErrors) {
  Tensor x = ones({1, 1, 2, 2}, dev_);
  EXPECT_THROW_MSG(F::max_pool2d(x, {3}), ValueError,
                   "Given input size: (1x2x2). Calculated output size: (1x0x0). Output size is too small");
  EXPECT_THROW_MSG(F::avg_pool2d(x, {3}), ValueError, "Output size is too small");
  EXPECT_THROW_MSG(F::max_pool2d(x, {2}, {2}, {2}), ValueError,
                   "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
  EXPECT_THROW_MSG(F::max_pool2d(ones({2, 2}, dev_), {2}), ValueError,
                   "non-empty 3D or 4D (batch mode) tensor expected for input");
  EXPECT_THROW_MSG(F::max_pool2d(x, {2}, {0}), ValueError, "stride should not be zero");
  EXPECT_THROW_MSG(F::max_pool2d(x, {1, 2, 3}), ValueError,
                   "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  EXPECT_THROW_MSG(F::max_pool2d(x, {2}, {}, {0}, {0}), ValueError,
                   "dilation should be greater than zero, but got dilationH: 0 dilationW: 0");
  EXPECT_THROW_MSG(F::max_pool2d(x.to(kInt64), {2}), TypeError, "\"max_pool2d\" not implemented for 'Long'");
}

TEST_P(NnFunctional, CrossEntropyWithClassIndices) {
  Tensor x = logits(), t = T({2, 1, 0}, kInt64);
  expect_near(F::cross_entropy(x, t), {0.52361852});
  expect_near(F::cross_entropy(x, t, "sum"), {1.57085562});
  expect_near(F::cross_entropy(x, t, "none"), {0.62186038, 0.1851825, 0.76381266});
  expect_near(F::cross_entropy(x.t().contiguous().t(), t), {0.52361852});  // column-major logits
  expect_near(F::cross_entropy(x, T({2, -100, 0}, kInt64)), {0.69283652});
  expect_near(F::cross_entropy(x, T({2, 3, 0}, kInt64), "mean", /*ignore_index=*/3), {0.69283652});
  expect_near(F::cross_entropy(x, t, "mean", -100, 0.1), {0.69236851});
  expect_near(F::cross_entropy(x, T({2, -100, 0}, kInt64), "none", -100, 0.2), {0.85936046, 0.0, 1.08881259});
  expect_near(F::cross_entropy(x, T({2, -100, 0}, kInt64), "sum", -100, 0.2), {1.94817305});
  // (N, C, d) input: classes along dim 1; and an unbatched (C) input with a 0-dim target.
  Tensor x3 = stack({x.t(), -x.t()}, 0);
  Tensor t3 = T({{2, 1, 0}, {3, 3, 1}}, kInt64);
  expect_near(F::cross_entropy(x3, t3), {1.6440649});
  expect_near(F::cross_entropy(x3, t3, "none"), {0.62186038, 0.1851825, 0.76381266, 1.27460241, 2.4197166, 4.59921455});
  expect_near(F::cross_entropy(x.select(0, 0), T(int64_t{2}, kInt64)), {0.62186038});
  expect_near(F::nll_loss(x.log_softmax(1), t), {0.52361852});
  expect_near(F::nll_loss(x, t, "none"), {-2.0, -3.0, -2.5});
}

TEST_P(NnFunctional, CrossEntropyWithClassProbabilities) {
  Tensor x = logits();
  Tensor p = T({{0.5, 0.25, 0.25, 0.0}, {0.0, 1.0, 0.0, 0.0}, {0.1, 0.2, 0.3, 0.4}});
  expect_near(F::cross_entropy(x, p), {1.5319519});
  expect_near(F::cross_entropy(x, p, "none"), {1.4968605, 0.1851825, 2.91381264});
  expect_near(F::cross_entropy(x, p, "mean", -100, 0.3), {1.73570192});
}

TEST_P(NnFunctional, LossErrors) {
  Tensor x = logits();
  EXPECT_THROW_MSG(F::cross_entropy(x, T({1.0, 2.0, 0.0})), TypeError, "expected scalar type Long but found Float");
  EXPECT_THROW_MSG(F::cross_entropy(x, T({1, 2, 0}, kInt32)), TypeError, "expected scalar type Long but found Int");
  EXPECT_THROW_MSG(F::nll_loss(x, T({1, 2}, kInt64)), ValueError,
                   "Expected input batch_size (3) to match target batch_size (2).");
  EXPECT_THROW_MSG(F::cross_entropy(x, T({1, 2, 0}, kInt64), "foo"), ValueError,
                   "foo is not a valid value for reduction");
  EXPECT_THROW_MSG(F::cross_entropy(x, T({1, 2, 0}, kInt64), "mean", -100, 1.5), ValueError,
                   "label_smoothing must be between 0.0 and 1.0. Got: 1.5");
  EXPECT_THROW_MSG(F::cross_entropy(x, zeros({3, 9}, TensorOptions(kInt64).device(dev_))), ValueError,
                   "0D or 1D target tensor expected, multi-target not supported");
  EXPECT_THROW_MSG(F::nll_loss(zeros({2, 3, 4}, dev_), zeros({2, 5}, TensorOptions(kInt64).device(dev_))), ValueError,
                   "Expected target size [2, 4], got [2, 5]");
}

TEST_P(NnFunctional, TargetOutOfBounds) {
  Tensor x = logits(), t = T({2, 10, 0}, kInt64);
  if (dev_.is_cpu()) {
    EXPECT_THROW_MSG(F::cross_entropy(x, t), IndexError, "Target 10 is out of bounds.");
    EXPECT_THROW_MSG(F::nll_loss(x, T({-1, 0, 0}, kInt64)), IndexError, "Target -1 is out of bounds.");
    return;
  }
  // On a cuda device the kernel fails asynchronously, as PyTorch's device-side assert.
  Tensor loss;
  EXPECT_NO_THROW(loss = F::cross_entropy(x, t));
  EXPECT_THROW_MSG(cuda::synchronize(dev_.index()), CudaError, "device-side assert triggered");
  cuda::reset_device(dev_.index());
}

TEST_P(NnFunctional, MseLossAndLinearAndOneHot) {
  Tensor a = T({{1, 2}, {3, 4}}), b = T({0.5, -1});
  expect_near(F::mse_loss(a, b), {10.125});  // broadcast, as PyTorch (which warns)
  expect_near(F::mse_loss(a, b, "sum"), {40.5});
  expect_near(F::mse_loss(a, b.expand({2, 2}), "none"), {0.25, 9.0, 6.25, 25.0});
  Tensor w = T({{1, 0, -1}, {0.5, 0.5, 0.5}});
  expect_near(F::linear(T({{1, 2, 3}}), w, T({10, 20})), {8.0, 23.0});
  expect_near(F::linear(T({1, 2, 3}), w), {-2.0, 3.0});
  EXPECT_THROW_MSG(F::linear(ones({2, 3}, dev_), ones({4, 5}, dev_)), ValueError,
                   "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x4)");
  Tensor oh = F::one_hot(T({{0, 2}, {1, 0}}, kInt64));
  EXPECT_EQ(oh.sizes(), (IntList{2, 2, 3}));
  EXPECT_EQ(oh.dtype(), kInt64);
  EXPECT_EQ(I(oh), (Longs{1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(I(F::one_hot(T({1}, kInt64), 4)), (Longs{0, 1, 0, 0}));
  EXPECT_THROW_MSG(F::one_hot(T({1, -1}, kInt64), 3), ValueError, "Class values must be non-negative.");
  EXPECT_THROW_MSG(F::one_hot(T({1, 3}, kInt64), 3), ValueError, "Class values must be smaller than num_classes.");
  EXPECT_THROW_MSG(F::one_hot(T({1.0, 3.0}), 3), TypeError, "one_hot is only applicable to index tensor.");
}

TEST_P(NnFunctional, BatchNormTrainingUpdatesRunningStats) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = ((i * 13) % 7 - 3) * 0.5;
  Tensor x = T(TensorData(v)).reshape({2, 3, 2, 2});
  Tensor rm = T({0.1, -0.2, 0.3}), rv = T({1.0, 2.0, 0.5}), w = T({1.5, -1.0, 0.5}), b = T({0.0, 1.0, -1.0});
  Tensor y = F::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  expect_near(y, {-1.87662327, 1.87662327, 1.25108218,  0.62554109,  0.66666961,  1.33333039,  1.99999106,  2.66665173,
                  -0.46595064, -0.7033059, -0.94066119, -1.17801642, -0.62554109, -1.25108218, -1.87662327, 1.87662327,
                  -0.66665184, 8.88e-06,   0.66666961,  1.33333039,  -1.65272689, -1.89008224, -0.46595064, -0.7033059},
              1e-5f);
  expect_near(rm, {0.09, -0.205, 0.3075});
  expect_near(rv, {1.06428576, 1.86428571, 0.57678568});
  expect_near(F::batch_norm(x, rm, rv, w, b, false),
              {-2.3118372, 2.05011988,  1.32312703,  0.59613413, 0.84986001,  1.21605515,  1.58225036, 1.94844544,
               -0.2149137, -0.54409033, -0.87326694, -1.2024436, -0.85785156, -1.58484435, -2.3118372, 2.05011988,
               0.11746973, 0.48366487,  0.84986001,  1.21605515, -1.86079693, -2.18997359, -0.2149137, -0.54409033});
  expect_near(F::batch_norm(x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}), rm, rv),
              {-1.54122472, 1.36674654, 0.88208461, 0.39742273,  0.15014,     -0.21605514, -0.5822503,  -0.94844544,
               1.57017255,  0.91181928, 0.25346601, -0.40488726, -0.57190102, -1.0565629,  -1.54122472, 1.36674654,
               0.88253027,  0.51633513, 0.15014,    -0.21605514, -1.72159386, -2.37994719, 1.57017255,  0.91181928});
  // (N, C) input (BatchNorm1d), momentum 0.5.
  Tensor rm2 = zeros({3}, dev_), rv2 = ones({3}, dev_);
  expect_near(F::batch_norm(x.reshape({8, 3}), rm2, rv2, {}, {}, true, 0.5),
              {-1.23958528, 1.23958528, 0.88191259, 0.64930654,  -0.17708361, -0.62993759, -0.7673623,  -1.5937525,
               1.38586271,  1.12152958, 0.29513934, -0.12598751, -0.29513934, -1.12152958, -1.63783765, 1.5937525,
               0.7673623,   0.37796253, 0.17708361, -0.64930654, -1.13388765, -1.23958528, 1.23958528,  0.88191259},
              1e-5f);
  expect_near(rm2, {-0.09375, 0.09375, 0.0625});
  expect_near(rv2, {1.140625, 1.140625, 1.0625});
  EXPECT_THROW_MSG(F::batch_norm(ones({2, 3}, dev_), rm, rv, ones({4}, dev_), {}, true), ValueError,
                   "weight should contain 3 elements not 4");
  EXPECT_THROW_MSG(F::batch_norm(ones({1, 3}, dev_), rm, rv, {}, {}, true), ValueError,
                   "Expected more than 1 value per channel when training, got input size [1, 3]");
  EXPECT_THROW_MSG(F::batch_norm(ones({2, 3}, dev_), {}, {}), ValueError,
                   "running_mean must be defined in evaluation mode");
}

TEST_P(NnFunctional, DropoutIsAPhiloxMaskScaledByTheKeepProbability) {
  Tensor x = ones({1000}, dev_);
  manual_seed(5);
  Tensor y = F::dropout(x, 0.25, true);
  std::vector<float> v = y.to_vector<float>();
  int kept = 0;
  for (float e : v) {
    EXPECT_TRUE(e == 0.f || std::fabs(e - 4.f / 3.f) < 1e-6f) << e;
    kept += e != 0.f;
  }
  EXPECT_GT(kept, 650);  // 750 expected; the bound is many standard deviations away
  EXPECT_LT(kept, 850);
  // The same seed gives the same mask on every device.
  manual_seed(5);
  EXPECT_EQ(F::dropout(ones({1000}), 0.25, true).to_vector<float>(), v);
  EXPECT_TRUE(F::dropout(x, 0.25, false).is_same(x));
  EXPECT_EQ(F::dropout(x, 1.0, true).sum().item<float>(), 0.f);
  EXPECT_THROW_MSG(F::dropout(x, 1.5), ValueError, "dropout probability has to be between 0 and 1, but got 1.5");
}

// Inputs large enough for the cpu kernels to split work over the thread pool.
TEST_P(NnFunctional, LargeInputsAgreeWithComposedReferences) {
  manual_seed(11);
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor x = randn({64, 784}, o);
  Tensor shifted = x - x.max(1, true);
  Tensor reference = shifted.exp() / shifted.exp().sum(1, true);
  EXPECT_TRUE(x.softmax(1).allclose(reference, 1e-5, 1e-7));
  EXPECT_TRUE(x.t().softmax(0).t().allclose(reference, 1e-5, 1e-7));  // the strided layout
  EXPECT_TRUE(x.log_softmax(1).allclose(shifted - shifted.exp().sum(1, true).log(), 1e-5, 1e-5));
  Tensor img = randn({4, 8, 64, 64}, o);
  auto larger = [](const Tensor& a, const Tensor& b) { return where(a.ge(b), a, b); };
  Tensor pooled = larger(larger(img.slice(2, 0, 64, 2).slice(3, 0, 64, 2), img.slice(2, 0, 64, 2).slice(3, 1, 64, 2)),
                         larger(img.slice(2, 1, 64, 2).slice(3, 0, 64, 2), img.slice(2, 1, 64, 2).slice(3, 1, 64, 2)));
  EXPECT_TRUE(F::max_pool2d(img, {2}).equal(pooled));
  EXPECT_TRUE(F::max_pool2d(img.transpose(2, 3), {2}).transpose(2, 3).equal(pooled));  // the general loop
  Tensor mean = img.mean(0, true).mean(2, true).mean(3, true);
  Tensor rm = zeros({8}, o), rv = ones({8}, o);
  F::batch_norm(img, rm, rv, {}, {}, true, 1.0);
  EXPECT_TRUE(rm.allclose(mean.flatten(), 1e-4, 1e-5));
  Tensor labels = x.argmax(1);
  EXPECT_TRUE(
      F::cross_entropy(x, labels, "none").allclose(-(x.log_softmax(1) * F::one_hot(labels, 784)).sum(1), 1e-5, 1e-5));
}

// The calls of api-training.md's "Operations added for training", as written there.
TEST_P(NnFunctional, ContractSpellings) {
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor a = ones({2, 3}, o), b = ones({2, 3}, o), x = rand({4, 6}, o), mask = x.gt(0.5);
  EXPECT_EQ(ember::cat({a, b}, /*dim=*/1).sizes(), (IntList{2, 6}));
  EXPECT_EQ(ember::stack({a, b}, 0).sizes(), (IntList{2, 2, 3}));
  EXPECT_EQ(x.chunk(3, 0).size(), 2u);
  EXPECT_EQ(x.split(2, 0).size(), 2u);
  EXPECT_EQ(ember::where(mask, x, x * 2).sizes(), x.sizes());
  EXPECT_LE(x.clamp(-1, 1).max().item<float>(), 1.f);
  EXPECT_EQ(x.softmax(1).sizes(), x.log_softmax(1).sizes());
  EXPECT_EQ(x.argmax(1, false).sizes(), (IntList{4}));
  EXPECT_EQ(x.reshape({2, 2, 6}).flatten(1, -1).sizes(), (IntList{2, 12}));
  EXPECT_EQ(x.masked_fill(mask, 0.0).sizes(), x.sizes());
  EXPECT_EQ(ember::addmm(ones({3}, o), a.t(), b).sizes(), (IntList{3, 3}));
  EXPECT_EQ(ember::bmm(ones({2, 2, 3}, o), ones({2, 3, 4}, o)).sizes(), (IntList{2, 2, 4}));
  Tensor img = rand({2, 3, 8, 8}, o), w = rand({5, 6}, o), bias = rand({5}, o);
  EXPECT_EQ(F::linear(x, w, bias).sizes(), (IntList{4, 5}));
  EXPECT_EQ(F::max_pool2d(img, {2, 2}, /*stride=*/{2, 2}, /*padding=*/{0, 0}).sizes(), (IntList{2, 3, 4, 4}));
  EXPECT_EQ(F::avg_pool2d(img, {2, 2}, {2, 2}, {0, 0}).sizes(), (IntList{2, 3, 4, 4}));
  EXPECT_EQ(F::dropout(img, 0.5, /*training=*/true).sizes(), img.sizes());
  Tensor running_mean = zeros({3}, o), running_var = ones({3}, o);
  EXPECT_EQ(F::batch_norm(img, running_mean, running_var, ones({3}, o), zeros({3}, o), /*training=*/true,
                          /*momentum=*/0.1, /*eps=*/1e-5)
                .sizes(),
            img.sizes());
  Tensor logits = rand({4, 10}, o), target = zeros({4}, TensorOptions(kInt64).device(dev_));
  EXPECT_EQ(F::cross_entropy(logits, target, "mean", -100, 0.0).dim(), 0);
  EXPECT_EQ(F::nll_loss(logits.log_softmax(1), target, "mean", -100).dim(), 0);
  EXPECT_EQ(F::mse_loss(a, b, "mean").item<float>(), 0.f);
  EXPECT_EQ(F::one_hot(target, /*num_classes=*/10).sizes(), (IntList{4, 10}));
}

EMBER_ON_DEVICES(NnFunctional, "cpu", "cuda:0");

}  // namespace
