// triu and tril: values against PyTorch 1.13's (the numbers below come from /usr/bin/python3,
// torch 1.13), batch dims, dtypes, non-contiguous and empty inputs, errors and gradients.
#include "ops_next_util.h"

using namespace ember;
using ember::testing::expect_ints;
using ember::testing::expect_values;

namespace {

class Triangular : public ember::testing::OpsOnDevice {
 protected:
  Tensor a() const { return arange(1, 25, 1, TensorOptions(kFloat64).device(dev_)).reshape({2, 3, 4}); }
};

TEST_P(Triangular, MatchesPyTorchOverBatchDims) {
  expect_values(triu(a(), 1), {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12, 0, 14, 15, 16, 0, 0, 19, 20, 0, 0, 0, 24});
  expect_values(a().tril(-1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 21, 22, 0, 0});
  Tensor m = a()[0];
  expect_values(m.triu(-1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  expect_values(tril(m, 2), {1, 2, 3, 0, 5, 6, 7, 8, 9, 10, 11, 12});
  expect_values(m.triu(), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  expect_values(m.tril(), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  expect_values(m.triu(10), std::vector<double>(12, 0.0));
  EXPECT_EQ(m.tril(-10).sum().item<double>(), 0.0);
  EXPECT_TRUE(m.triu(-10).equal(m));
}

TEST_P(Triangular, DtypesLayoutsAndEmpty) {
  Tensor i = T({{1, 2}, {3, 4}}, kInt32);
  EXPECT_EQ(i.triu().dtype(), kInt32);
  expect_ints(i.triu(), {1, 2, 0, 4});
  Tensor b = T({{true, true}, {true, true}}, kBool);
  EXPECT_EQ(b.tril().dtype(), kBool);
  expect_ints(b.tril(), {1, 0, 1, 1});
  Tensor t = a()[0].t();  // {4, 3}, non-contiguous
  expect_values(t.triu(), {1, 5, 9, 0, 6, 10, 0, 0, 11, 0, 0, 0});
  EXPECT_EQ(triu(a().narrow(1, 0, 0)).sizes(), (IntList{2, 0, 4}));
  EXPECT_THROW_MSG(triu(T({1.0, 2.0})), ValueError, "triu: input tensor must have at least 2 dimensions");
  EXPECT_THROW_MSG(tril(T(1.0)), ValueError, "tril: input tensor must have at least 2 dimensions");
}

TEST_P(Triangular, Gradients) {
  using Ts = std::vector<Tensor>;
  gradcheck("triu", [](const Ts& x) { return Ts{x[0].triu(1)}; }, {R({2, 3, 4})});
  gradcheck("tril", [](const Ts& x) { return Ts{tril(x[0], -1)}; }, {R({3, 3})});
  Tensor x = a().requires_grad_(true);
  Tensor y = x.triu();
  EXPECT_EQ(y.grad_fn()->name(), "TriuBackward0");
  EXPECT_EQ(x.tril().grad_fn()->name(), "TrilBackward0");
  y.sum().backward();
  expect_values(x.grad()[1], {1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1});
}

EMBER_ON_DEVICES(Triangular, "cpu", "cuda:0");

}  // namespace
