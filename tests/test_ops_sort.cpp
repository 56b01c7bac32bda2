// sort and topk: values and indices against PyTorch 1.13's (the numbers below come from
// /usr/bin/python3, torch 1.13, sort with stable=True), the stable order of ties, NaN as
// the largest value, integer dtypes, errors, non-contiguous and empty inputs, gradients,
// and the device's results equal to the cpu's.
#include <cmath>

#include "ops_on_devices.h"

using namespace ember;
using ember::testing::expect_ints;
using ember::testing::expect_values;

namespace {

class Sort : public ember::testing::OpsOnDevice {
 protected:
  Tensor v() const { return T({{3., 1., NAN, 1., 2.}, {0., -1., 5., 5., -0.0}}); }
};

TEST_P(Sort, SortMatchesPyTorch) {
  auto [values, indices] = v().sort(1);
  expect_values(values, {1, 1, 2, 3, NAN, -1, 0, -0.0, 5, 5});
  expect_ints(indices, {1, 3, 4, 0, 2, 1, 0, 4, 2, 3});
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_EQ(values.device(), dev_);
  auto [down, down_indices] = sort(v(), -1, /*descending=*/true);
  expect_values(down, {NAN, 3, 2, 1, 1, 5, 5, 0, -0.0, -1});
  expect_ints(down_indices, {2, 0, 4, 1, 3, 2, 3, 0, 4, 1});
  auto [by_column, column_indices] = v().sort(0);
  expect_values(by_column, {0, -1, 5, 1, -0.0, 3, 1, NAN, 5, 2});
  expect_ints(column_indices, {1, 1, 1, 0, 1, 0, 0, 0, 1, 0});
}

TEST_P(Sort, TopkMatchesPyTorch) {
  auto [values, indices] = v().topk(2);
  expect_values(values, {NAN, 3, 5, 5});
  expect_ints(indices, {2, 0, 2, 3});
  Tensor i = T({{4, 1, 3, 1}, {2, 9, -7, 2}}, kInt32);
  auto [top, top_indices] = topk(i, 2);
  EXPECT_EQ(top.dtype(), kInt32);
  expect_ints(top, {4, 3, 9, 2});
  // PyTorch 1.13 gives index 3 for the tied 2 (its topk leaves ties unspecified); ember's
  // order is stable, so the first 2 (index 0) comes first.
  expect_ints(top_indices, {0, 2, 1, 0});
  auto [low, low_indices] = i.topk(2, 1, /*largest=*/false);
  expect_ints(low, {1, 1, -7, 2});
  expect_ints(low_indices, {1, 3, 2, 0});
  auto [sorted_i, order] = i.sort(1);
  expect_ints(sorted_i, {1, 1, 3, 4, -7, 2, 2, 9});
  expect_ints(order, {1, 3, 2, 0, 2, 0, 3, 1});
}

// Ties keep their order in the input, ascending and descending (PyTorch's stable=True;
// PyTorch's topk leaves the order of ties unspecified).
TEST_P(Sort, TiesAreStable) {
  Tensor x = T({2, 1, 2, 1, 2}, kInt64);
  expect_ints(x.sort(0, true).second, {0, 2, 4, 1, 3});
  expect_ints(x.sort(0).second, {1, 3, 0, 2, 4});
  expect_ints(x.topk(2).second, {0, 2});
  expect_ints(x.topk(3, 0, false).second, {1, 3, 0});
  Tensor b = T({true, false, true}, kBool);
  expect_ints(b.sort().second, {1, 0, 2});
}

// topk's selection of a small k (Note [Small k selection]) and the one-word keys of 32-bit
// compute types: values and indices of distinct values against PyTorch 1.13's
// (/usr/bin/python3), unsigned and signed 8-bit extremes, and -0.0 tied with 0.0.
TEST_P(Sort, TopkSelectionMatchesPyTorch) {
  Tensor x = T({-10.0, -1.5, 7.0, -4.5, 4.0, -7.5, 1.0,  9.5, -2.0, 6.5, -5.0, 3.5, -8.0, 0.5,
                9.0,   -2.5, 6.0, -5.5, 3.0, -8.5, 0.0,  8.5, -3.0, 5.5, -6.0, 2.5, -9.0, -0.5,
                8.0,   -3.5, 5.0, -6.5, 2.0, -9.5, -1.0, 7.5, -4.0, 4.5, -7.0, 1.5},
               kFloat32);
  auto [top, top_indices] = x.topk(5);
  expect_values(top, {9.5, 9.0, 8.5, 8.0, 7.5});
  expect_ints(top_indices, {7, 14, 21, 28, 35});
  auto [low, low_indices] = x.topk(3, 0, /*largest=*/false);
  expect_values(low, {-10.0, -9.5, -9.0});
  expect_ints(low_indices, {0, 33, 26});
  Tensor u = T({200, 100, 255, 3, 128}, kUInt8);
  expect_ints(u.topk(2).first, {255, 200});
  expect_ints(u.topk(2).second, {2, 0});
  expect_ints(u.topk(2, 0, false).second, {3, 1});
  Tensor i8 = T({-128, 127, -1, 0}, kInt8);
  expect_ints(i8.topk(2).second, {1, 3});
  expect_ints(i8.topk(2, 0, false).second, {0, 2});
  auto [zeros_top, zeros_index] = T({0.0, -0.0, 0.0, -1.0}, kFloat32).topk(2);
  expect_ints(zeros_index, {0, 1});
  EXPECT_TRUE(std::signbit(zeros_top.cpu().to_vector<float>()[1]));  // the input's bits
}

// Any k, both directions, every real dtype, ties and NaNs: topk's k equal the stable
// sort's first k (the order of ties ember documents).
TEST_P(Sort, TopkEqualsStableSortPrefix) {
  for (DType d : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt8, kUInt8, kInt32, kInt64, kBool}) {
    Tensor x = (randn({3, 100}, TensorOptions(kFloat64).device(dev_)) * 4).abs().to(kInt64).to(d);
    if (is_floating_point(d)) x = x.masked_fill(randn({3, 100}, TensorOptions(kFloat64).device(dev_)).gt(1.5), NAN);
    for (int64_t k : {0, 1, 5, 32, 33, 99, 100}) {
      for (bool largest : {true, false}) {
        auto [values, indices] = x.topk(k, 1, largest);
        auto [sorted, order] = x.sort(1, largest);
        EXPECT_TRUE(indices.equal(order.narrow(1, 0, k))) << d << " k " << k << " largest " << largest;
        auto nan_as_minus_one = [](const Tensor& t) {
          Tensor w = t.to(kFloat64);
          return w.masked_fill(w.ne(w), -1);
        };
        EXPECT_TRUE(nan_as_minus_one(values).equal(nan_as_minus_one(sorted.narrow(1, 0, k))));
        Tensor column = x.t().topk(k, 0, largest).second;  // non-contiguous lines
        EXPECT_TRUE(column.t().equal(indices)) << d << " k " << k;
      }
    }
  }
}

TEST_P(Sort, Errors) {
  EXPECT_THROW_MSG(v().topk(6), ValueError, "selected index k out of range");
  EXPECT_THROW_MSG(v().topk(-1), ValueError, "selected index k out of range");
  EXPECT_THROW_MSG(v().sort(2), IndexError, "Dimension out of range");
  EXPECT_THROW_MSG(T({1.0}, kComplex64).sort(), TypeError, "\"sort\" not implemented for 'ComplexFloat'");
}

TEST_P(Sort, NonContiguousEmptyAndScalar) {
  Tensor x = T({{5., 1., 4.}, {2., 8., 0.}}).t();  // {3, 2}, column-major
  auto [values, indices] = x.sort(0);
  expect_values(values, {1, 0, 4, 2, 5, 8});
  expect_ints(indices, {1, 2, 2, 0, 0, 1});
  auto [top, top_indices] = x.topk(1, 0);
  expect_values(top, {5, 8});
  expect_ints(top_indices, {0, 1});
  auto [empty_values, empty_indices] = T({1.0}).narrow(0, 0, 0).reshape({0, 3}).sort(1);
  EXPECT_EQ(empty_values.sizes(), (IntList{0, 3}));
  EXPECT_EQ(empty_indices.sizes(), (IntList{0, 3}));
  EXPECT_EQ(v().topk(0).first.sizes(), (IntList{2, 0}));
  auto [scalar, scalar_index] = T(5.0).sort();
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<double>(), 5.0);
  EXPECT_EQ(scalar_index.item<int64_t>(), 0);
}

// Lines longer than a block, with many ties: the device's rank sort gives the cpu's order.
TEST_P(Sort, DeviceEqualsCpu) {
  Tensor x = (randn({7, 300}, TensorOptions(kFloat32).device(dev_)) * 3).to(kInt32).to(kFloat32);
  Tensor x_cpu = x.cpu();
  for (bool descending : {false, true}) {
    auto [values, indices] = x.sort(1, descending);
    auto [cpu_values, cpu_indices] = x_cpu.sort(1, descending);
    EXPECT_TRUE(values.cpu().equal(cpu_values));
    EXPECT_TRUE(indices.cpu().equal(cpu_indices));
  }
  auto [top, top_indices] = x.topk(17, 1, true);
  EXPECT_TRUE(top_indices.cpu().equal(x_cpu.topk(17, 1).second));
  EXPECT_TRUE(top.cpu().equal(x_cpu.topk(17, 1).first));
}

TEST_P(Sort, Gradients) {
  using Ts = std::vector<Tensor>;
  gradcheck("sort", [](const Ts& x) { return Ts{x[0].sort(1).first}; }, {R({3, 4})});
  gradcheck("sort descending dim 0", [](const Ts& x) { return Ts{x[0].sort(0, true).first}; }, {R({3, 4})});
  gradcheck("topk", [](const Ts& x) { return Ts{x[0].topk(2).first}; }, {R({3, 4})});
  gradcheck("topk smallest", [](const Ts& x) { return Ts{x[0].topk(2, 0, false).first}; }, {R({3, 4})});
  Tensor x = T({1., 5., 3., 4.}).requires_grad_(true);
  auto [top, index] = x.topk(2);
  EXPECT_EQ(top.grad_fn()->name(), "TopkBackward0");
  EXPECT_EQ(x.sort().first.grad_fn()->name(), "SortBackward0");
  EXPECT_FALSE(index.requires_grad());
  (top * T({10., 20.})).sum().backward();
  expect_values(x.grad(), {0, 10, 0, 20});
}

EMBER_ON_DEVICES(Sort, "cpu", "cuda:0");

}  // namespace
