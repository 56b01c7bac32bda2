// The kernel forms of conv2d's and max_pool2d's gradients (Col2Im, Im2Col + Matmul,
// MaxPool2dBackward; nn/backward_kernels.h), which backward() takes when it records no graph
// of the backward, on the cpu and cuda:0 (emulated without a GPU): against gradients computed by
// PyTorch 1.13 (/usr/bin/python3, float64; the script is in each test's comment), and
// against the op-by-op form that create_graph=true takes, for strided, padded, dilated and
// grouped geometries and non-contiguous output gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

namespace F = nn::functional;

void expect_near(const Tensor& got, const std::vector<double>& expected, double tolerance) {
  std::vector<double> values = got.to(Device(kCPU)).to(kFloat64).contiguous().to_vector<double>();
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected[i], tolerance) << "element " << i;
}

void expect_close(const Tensor& got, const Tensor& expected, double tolerance) {
  ASSERT_EQ(got.sizes(), expected.sizes());
  ASSERT_EQ(got.device(), expected.device());
  std::vector<double> a = got.to(Device(kCPU)).to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> b = expected.to(Device(kCPU)).to(kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance * (1 + std::abs(b[i]))) << "element " << i;
}

// {f(0), f(1), ...} shaped `shape`, float64.
template <typename Fn>
Tensor generated(const IntList& shape, Fn f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = f(static_cast<double>(i));
  return tensor(TensorData(values), TensorOptions(kFloat64)).reshape(shape);
}

class ConvPoolBackward : public ember::testing::OnDevice {
 protected:
  Tensor leaf(const Tensor& t) const { return t.to(dev_, false, /*copy=*/true).requires_grad_(); }
};

// x = (arange(40).reshape(1, 2, 4, 5) * 0.37).sin(); w = (arange(12).reshape(2, 1, 3, 2) * 0.53).cos()
// y = conv2d(x, w, stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2)
// y.backward(arange(20).reshape(y.shape) * 0.11 - 0.5)
TEST_P(ConvPoolBackward, Conv2dGradientsMatchPyTorch) {
  Tensor x = leaf(generated({1, 2, 4, 5}, [](double i) { return std::sin(i * 0.37); }));
  Tensor w = leaf(generated({2, 1, 3, 2}, [](double i) { return std::cos(i * 0.53); }));
  Tensor y = conv2d(x, w, {}, {2, 1}, {1, 1}, {1, 2}, 2);
  ASSERT_EQ(y.sizes(), (IntList{1, 2, 2, 5}));
  y.backward((arange(20, kFloat64).reshape({1, 2, 2, 5}) * 0.11 - 0.5).to(dev_));
  expect_near(
      x.grad(),
      {-0.19066011192560572, -0.1272829364701014, -0.07561928168462953, -0.023955626899157707, 0.00326442379328775,
       0.36358318831033587,  0.9000937405081992,  0.9506075774511936,   1.001121414394188,     0.47773566009491786,
       0.07821953309768441,  0.1310353374572578,  0.18269899224272962,  0.23436264702820145,   -0.007296947302643207,
       -0.08352130802475319, -0.1850213170856853, -0.3394162578993146,  -0.4938111987129439,   -0.33500123443374874,
       -0.32306060040174633, -0.3385647490432017, -0.38228268418534206, -0.4260006193274824,   0.053548615195177625,
       -0.8654650072640238,  -1.344141742788952,  -1.3868866987241157,  -1.4296316546592782,   -0.4111607986948522,
       -0.5733188119805639,  -0.5571544247539035, -0.6008723598960438,  -0.6445902950381841,   0.08521715106329343,
       0.6985116635857436,   1.7934084340478345,  1.9532858851867265,   2.113163336325619,     1.3306044159599364},
      1e-12);
  expect_near(w.grad(),
              {0.6565057310891305, 0.10126438846690825, -1.4242342690453564, -1.6659305362201944, -0.7179656004990544,
               -0.28057412150203814, -2.118872904296557, -3.428537619897576, -0.8379607295247702, 0.09316485437476935,
               2.958192184446043, 2.6520197658482587},
              1e-12);
}

// x = tensor([[3,1,4,1,5],[9,2,6,5,3],[5,8,9,7,9],[3,2,3,8,4]]).reshape(1, 1, 4, 5)
// max_pool2d(x, 2, stride=1, padding=1).backward(arange(30).reshape(1, 1, 5, 6) + 1)
// max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True).backward(arange(9).reshape(1, 1, 3, 3) + 1)
TEST_P(ConvPoolBackward, MaxPool2dGradientsMatchPyTorch) {
  const std::vector<double> data{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
  const Tensor values = tensor(TensorData(data), TensorOptions(kFloat64)).reshape({1, 1, 4, 5});
  Tensor x = leaf(values);
  Tensor y = F::max_pool2d(x, {2}, {1}, {1});
  ASSERT_EQ(y.sizes(), (IntList{1, 1, 5, 6}));
  y.backward((arange(30, kFloat64).reshape({1, 1, 5, 6}) + 1).to(dev_));
  expect_near(x.grad(), {3, 0, 7, 0, 34, 42, 0, 19, 0, 0, 19, 20, 74, 0, 82, 51, 0, 27, 57, 30}, 0);

  Tensor x3 = leaf(values);
  Tensor y3 = F::max_pool2d(x3, {3}, {2}, {1}, {1}, /*ceil_mode=*/true);
  ASSERT_EQ(y3.sizes(), (IntList{1, 1, 3, 3}));
  y3.backward((arange(9, kFloat64).reshape({1, 1, 3, 3}) + 1).to(dev_));
  expect_near(x3.grad(), {0, 0, 0, 0, 3, 5, 0, 2, 0, 0, 0, 0, 5, 0, 6, 7, 0, 0, 17, 0}, 0);
}

// Gradients of `out` w.r.t. `inputs` for `grad_out`, by the kernels (no graph recorded) and
// by the op-by-op form (create_graph).
std::pair<std::vector<Tensor>, std::vector<Tensor>> both_ways(const Tensor& out, const std::vector<Tensor>& inputs,
                                                              const Tensor& grad_out) {
  std::vector<Tensor> kernels = autograd::grad({out}, inputs, {grad_out}, /*retain_graph=*/true);
  std::vector<Tensor> ops = autograd::grad({out}, inputs, {grad_out}, /*retain_graph=*/true, /*create_graph=*/true);
  return {kernels, ops};
}

struct ConvCase {
  IntList input, weight, stride, padding, dilation;
  int64_t groups;
};

TEST_P(ConvPoolBackward, Conv2dKernelsMatchTheOpByOpGradients) {
  manual_seed(3);
  const std::vector<ConvCase> cases = {
      {{4, 3, 9, 8}, {6, 3, 3, 3}, {1}, {1}, {1}, 1},           // the training CNN's layer shape
      {{2, 8, 16, 16}, {16, 8, 3, 3}, {1}, {1}, {1}, 1},        // a channel-major forward
      {{2, 4, 7, 9}, {6, 2, 3, 2}, {2, 3}, {1, 2}, {2, 1}, 2},  // strided, padded, dilated, grouped
      {{3, 2, 5, 5}, {4, 2, 1, 1}, {1}, {0}, {1}, 1},           // 1x1
      {{1, 1, 4, 4}, {2, 1, 4, 4}, {1}, {0}, {1}, 1},           // the window is the whole input
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << (&c - cases.data()));
    Tensor x = leaf(randn(c.input, kFloat64));
    Tensor w = leaf(randn(c.weight, kFloat64));
    Tensor y = conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    // A transposed, non-contiguous output gradient.
    IntList swapped = y.sizes();
    std::swap(swapped[2], swapped[3]);
    Tensor g = randn(swapped, kFloat64).to(dev_).transpose(2, 3);
    auto [kernels, ops] = both_ways(y, {x, w}, g);
    expect_close(kernels[0], ops[0], 1e-12);
    expect_close(kernels[1], ops[1], 1e-12);
  }
}

// The forward takes one product per batch item when each is small and one product over the
// whole batch (channel-major columns) otherwise: a convolution large enough for the latter
// must equal its output channels computed two at a time (small enough for the former).
TEST_P(ConvPoolBackward, Conv2dForwardPathsAgree) {
  manual_seed(5);
  for (int64_t groups : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "groups " << groups);
    Tensor x = randn({3, 8, 16, 16}, kFloat64).to(dev_);
    Tensor w = randn({16, 8 / groups, 3, 3}, kFloat64).to(dev_);
    Tensor b = randn({16}, kFloat64).to(dev_);
    Tensor whole = conv2d(x, w, b, {1}, {1}, {1}, groups);
    std::vector<Tensor> pairs;
    for (int64_t c = 0; c < 16; c += 2) {
      const int64_t g = c / (16 / groups);  // the group of output channels c and c + 1
      Tensor xg = x.narrow(1, g * (8 / groups), 8 / groups);
      pairs.push_back(conv2d(xg, w.narrow(0, c, 2), b.narrow(0, c, 2), {1}, {1}));
    }
    expect_close(whole, cat(pairs, 1), 1e-12);
  }
}

TEST_P(ConvPoolBackward, MaxPool2dKernelMatchesTheOpByOpGradient) {
  manual_seed(4);
  struct PoolCase {
    IntList input, kernel, stride, padding, dilation;
    bool ceil_mode;
  };
  const std::vector<PoolCase> cases = {
      {{4, 3, 8, 8}, {2}, {}, {0}, {1}, false},              // the training CNN's 2x2 pooling
      {{2, 2, 7, 9}, {3, 2}, {1, 2}, {1, 1}, {1, 2}, true},  // overlapping, padded, dilated
      {{1, 3, 5, 6}, {3}, {2}, {1}, {1}, true},
  };
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << (&c - cases.data()));
    // Few distinct values: ties, where the first maximum takes the gradient.
    Tensor x = leaf(generated(c.input, [](double i) { return std::fmod(i * 7, 5); }).to(kFloat32));
    Tensor y = F::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    IntList swapped = y.sizes();
    std::swap(swapped[0], swapped[1]);
    Tensor g = randn(swapped, kFloat32).to(dev_).transpose(0, 1);
    auto [kernels, ops] = both_ways(y, {x}, g);
    expect_close(kernels[0], ops[0], 1e-6);
  }
}

TEST_P(ConvPoolBackward, UnbatchedInputsGetUnbatchedGradients) {
  Tensor x = leaf(generated({2, 6, 6}, [](double i) { return std::sin(i); }).to(kFloat32));
  Tensor w = leaf(generated({3, 2, 3, 3}, [](double i) { return std::cos(i); }).to(kFloat32));
  Tensor y = F::max_pool2d(conv2d(x, w, {}, {1}, {1}), {2});
  ASSERT_EQ(y.sizes(), (IntList{3, 3, 3}));
  y.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_EQ(w.grad().sizes(), w.sizes());
  EXPECT_EQ(x.grad().device(), dev_);
}

EMBER_ON_DEVICES(ConvPoolBackward, "cpu", "cuda:0");

}  // namespace
}  // namespace ember
