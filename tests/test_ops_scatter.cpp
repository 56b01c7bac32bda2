// gather, scatter_add and scatter_add_: values against PyTorch 1.13's (the numbers below come
// from /usr/bin/python3, torch 1.13), PyTorch's shape and index errors, integer dtypes,
// non-contiguous and empty inputs, gradients, and the device equal to the cpu.
#include "ops_on_devices.h"

using namespace ember;
using ember::testing::expect_ints;
using ember::testing::expect_values;

namespace {

class Scatter : public ember::testing::OpsOnDevice {
 protected:
  Tensor I(const TensorData& d) const { return T(d, kInt64); }
  Tensor y() const { return arange(12, TensorOptions(kFloat64).device(dev_)).reshape({3, 4}); }
};

TEST_P(Scatter, GatherMatchesPyTorch) {
  expect_values(y().gather(0, I({{2, 1, 0, 2}, {0, 0, 1, 1}})), {8, 5, 2, 11, 0, 1, 6, 7});
  expect_values(gather(y(), 1, I({{3}, {0}})), {3, 4});  // index smaller than self
  expect_values(gather(y(), -1, I({{3}, {0}})), {3, 4});
  expect_values(y().t().gather(0, I({{1, 2, 0}})), {1, 6, 8});  // non-contiguous self
  expect_values(y().gather(1, I({{0, 1}, {2, 3}, {0, 1}}).t().contiguous().t()), {0, 1, 6, 7, 8, 9});
  Tensor i = T({{1, 2}, {3, 4}}, kInt32).gather(1, I({{0, 0}, {1, 0}}));
  EXPECT_EQ(i.dtype(), kInt32);
  expect_ints(i, {1, 1, 4, 3});
  EXPECT_EQ(y().gather(0, I({1}).narrow(0, 0, 0).reshape({0, 4})).sizes(), (IntList{0, 4}));
  EXPECT_EQ(T(5.0).gather(0, I(0)).item<double>(), 5.0);
}

TEST_P(Scatter, GatherErrors) {
  EXPECT_THROW_MSG(y().gather(0, I({{0, 1, 0, 1, 0}})), ValueError,
                   "Size does not match at dimension 1 expected index [1, 5] to be smaller than self [3, 4] apart "
                   "from dimension 0");
  EXPECT_THROW_MSG(y().gather(0, I({0, 1})), ValueError,
                   "Index tensor must have the same number of dimensions as input tensor");
  EXPECT_THROW_MSG(y().gather(0, T({{0, 1}}, kInt32)), TypeError, "gather(): Expected dtype int64 for index");
  EXPECT_THROW_MSG(y().gather(2, I({{0}})), IndexError, "Dimension out of range");
}

// An index out of range: PyTorch's IndexError on the cpu; on a cuda device the kernel fails
// asynchronously, as PyTorch's device-side assert, and the next synchronizing call reports it.
TEST_P(Scatter, IndexOutOfRange) {
  Tensor five = T({0.0, 1, 2, 3, 4});
  Tensor z = zeros({5}, TensorOptions(kFloat64).device(dev_));
  if (dev_.is_cpu()) {
    EXPECT_THROW_MSG(five.gather(0, I({7})), IndexError, "index 7 is out of bounds for dimension 0 with size 5");
    EXPECT_THROW_MSG(five.gather(0, I({-1})), IndexError, "index -1 is out of bounds for dimension 0 with size 5");
    EXPECT_THROW_MSG(z.scatter_add_(0, I({1, 7}), T({1.0, 1.0})), IndexError,
                     "index 7 is out of bounds for dimension 0 with size 5");
    expect_values(z, {0, 0, 0, 0, 0});  // nothing written
    return;
  }
  for (int op = 0; op < 2; ++op) {
    EXPECT_NO_THROW(op == 0 ? five.gather(0, I({7})) : z.scatter_add(0, I({1, 7}), T({1.0, 1.0})));
    EXPECT_THROW_MSG(cuda::synchronize(dev_.index()), CudaError, "device-side assert triggered");
    cuda::reset_device(dev_.index());
    five = T({0.0, 1, 2, 3, 4});
    z = zeros({5}, TensorOptions(kFloat64).device(dev_));
  }
}

TEST_P(Scatter, ScatterAddMatchesPyTorch) {
  Tensor z = zeros({3, 5}, TensorOptions(kFloat64).device(dev_));
  Tensor out =
      z.scatter_add(0, I({{0, 1, 2, 0, 0}, {2, 0, 0, 1, 2}}), ones({2, 5}, TensorOptions(kFloat64).device(dev_)));
  expect_values(out, {1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  expect_values(z, std::vector<double>(15, 0.0));                                       // out of place
  Tensor src = arange(1, 11, 1, TensorOptions(kFloat64).device(dev_)).reshape({2, 5});  // larger than index
  Tensor w = zeros({2, 4}, TensorOptions(kFloat64).device(dev_));
  Tensor& same = w.scatter_add_(1, I({{0, 1, 0}, {3, 3, 2}}), src);
  EXPECT_TRUE(same.is_same(w));
  expect_values(w, {4, 2, 0, 0, 0, 0, 8, 13});
  Tensor n = T({1, 1, 1, 1}, kInt64);
  n.scatter_add_(0, I({1, 1, 3}), T({5, 6, 7}, kInt64));
  expect_ints(n, {1, 12, 1, 8});
  Tensor t = zeros({4, 2}, TensorOptions(kFloat64).device(dev_)).t();  // non-contiguous self
  t.scatter_add_(1, I({{0, 0}}), T({{1.5, 2.5}}));
  expect_values(t, {4, 0, 0, 0, 0, 0, 0, 0});
  Tensor e = y().scatter_add(0, I({1}).narrow(0, 0, 0).reshape({0, 4}), y());
  EXPECT_TRUE(e.equal(y()));
}

TEST_P(Scatter, ScatterAddErrorsLeaveSelfIntact) {
  Tensor s = zeros({2, 3}, TensorOptions(kFloat64).device(dev_));
  EXPECT_THROW_MSG(s.scatter_add_(0, I({{0, 1, 0, 1}}), T({{1.0, 1, 1, 1}})), ValueError,
                   "Expected index [1, 4] to be smaller than self [2, 3] apart from dimension 0 and to be smaller "
                   "size than src [1, 4]");
  EXPECT_THROW_MSG(s.scatter_add_(0, I({{0, 1, 0}}), T({{1.0, 1}})), ValueError,
                   "Expected index [1, 3] to be smaller than self [2, 3] apart from dimension 0 and to be smaller "
                   "size than src [1, 2]");
  EXPECT_THROW_MSG(s.scatter_add_(0, I({0, 1}), T({{1.0, 1, 1}, {1.0, 1, 1}})), ValueError,
                   "Index tensor must have the same number of dimensions as self tensor");
  EXPECT_THROW_MSG(s.scatter_add_(0, I({{0, 1}}), T({{1.0, 1}}, kFloat32)), TypeError,
                   "scatter(): Expected self.dtype to be equal to src.dtype");
  expect_values(s, std::vector<double>(6, 0.0));
  Tensor expanded = zeros({1}, TensorOptions(kFloat64).device(dev_)).expand({3});
  EXPECT_THROW_MSG(expanded.scatter_add_(0, I({0}), T({1.0})), ValueError,
                   "more than one element of the written-to tensor refers to a single memory location");
  Tensor leaf = zeros({2}, TensorOptions(kFloat64).device(dev_).requires_grad(true));
  EXPECT_THROW(leaf.scatter_add_(0, I({0}), T({1.0})), Error);
}

// Many additions into few places: the device's line-by-line sums are the cpu's, bit for bit.
TEST_P(Scatter, DeviceEqualsCpu) {
  Tensor src = randn({3, 1000}, TensorOptions(kFloat32).device(dev_));
  Tensor index = (rand({3, 1000}, TensorOptions(kFloat32).device(dev_)) * 7).to(kInt64);
  Tensor out = zeros({3, 7}, TensorOptions(kFloat32).device(dev_)).scatter_add(1, index, src);
  Tensor cpu_out = zeros({3, 7}).scatter_add(1, index.cpu(), src.cpu());
  EXPECT_TRUE(out.cpu().equal(cpu_out));
  EXPECT_TRUE(src.gather(1, index).cpu().equal(src.cpu().gather(1, index.cpu())));
}

TEST_P(Scatter, Gradients) {
  using Ts = std::vector<Tensor>;
  Tensor index = I({{2, 1, 0, 2}, {0, 0, 1, 1}});
  gradcheck("gather", [index](const Ts& a) { return Ts{a[0].gather(0, index)}; }, {R({3, 4})});
  gradcheck("scatter_add", [index](const Ts& a) { return Ts{a[0].scatter_add(0, index, a[1])}; },
            {R({3, 4}), R({2, 4})});
  gradcheck("scatter_add, src larger", [index](const Ts& a) { return Ts{a[0].scatter_add(0, index, a[1])}; },
            {R({3, 4}), R({3, 5})});
  gradcheck("scatter_add_",
            [index](const Ts& a) {
              Tensor self = a[0] * 1;
              self.scatter_add_(0, index, a[1]);
              return Ts{self};
            },
            {R({3, 4}), R({2, 4})});
  Tensor x = y().requires_grad_(true);
  Tensor g = x.gather(1, I({{0, 0}, {1, 1}, {3, 2}}));
  EXPECT_EQ(g.grad_fn()->name(), "GatherBackward0");
  g.sum().backward();
  expect_values(x.grad(), {2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1});
}

EMBER_ON_DEVICES(Scatter, "cpu", "cuda:0");

}  // namespace
