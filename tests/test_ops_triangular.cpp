// triu and tril: values against PyTorch 1.13's (the numbers below come from /usr/bin/python3,
// torch 1.13), batch dims, dtypes, non-contiguous and empty inputs, errors and gradients.
#include <complex>
#include <limits>

#include "ops_on_devices.h"

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

// The Triangle kernel's paths: NaN and inf (zeroed where masked, kept elsewhere; from
// /usr/bin/python3, torch 1.13), float16 and complex, rows and columns of size 1, diagonals
// past the matrix, and strided and permuted batch dims against the mask built from aranges.
TEST_P(Triangular, KernelPaths) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor m = T({{NAN, 1.0}, {inf, NAN}}, kFloat32);
  expect_values(m.triu(), {NAN, 1.0, 0.0, NAN});
  expect_values(m.tril(), {NAN, 0.0, inf, NAN});
  Tensor h = T({{1.5, 2.5, -3.0}, {4.0, 5.5, 6.25}}, kFloat16);
  EXPECT_EQ(h.triu(1).dtype(), kFloat16);
  expect_values(h.triu(1), {0, 2.5, -3.0, 0, 0, 6.25});
  expect_values(h.tril(0), {1.5, 0, 0, 4.0, 5.5, 0});
  using c64 = std::complex<float>;
  using c128 = std::complex<double>;
  Tensor c = tensor({c128(1, 2), c128(3, -1), c128(0, 2), c128(-1, 0)}, TensorOptions(kComplex64).device(dev_))
                 .reshape({2, 2});
  EXPECT_EQ(c.tril(-1).to_vector<c64>(), (std::vector<c64>{0, 0, c64(0, 2), 0}));
  EXPECT_EQ(c.triu().to_vector<c64>(), (std::vector<c64>{c64(1, 2), c64(3, -1), 0, c64(-1, 0)}));
  Tensor u = T({{200, 100}, {7, 9}}, kUInt8);
  expect_ints(u.tril(), {200, 0, 7, 9});
  expect_values(a()[0].narrow(0, 1, 1).triu(1), {0, 6, 7, 8});  // one row
  expect_values(a()[0].narrow(1, 2, 1).tril(-1), {0, 7, 11});   // one column
  Tensor ones_23 = ones({2, 3}, TensorOptions().device(dev_));
  expect_values(ones_23.triu(int64_t{1} << 40), std::vector<double>(6, 0.0));
  // PyTorch 1.13 wraps row + diagonal around at the largest int64 (it keeps row 1); the
  // triangle itself is empty.
  expect_values(ones_23.triu(std::numeric_limits<int64_t>::max()), std::vector<double>(6, 0.0));
  expect_values(ones_23.triu(std::numeric_limits<int64_t>::min()), std::vector<double>(6, 1.0));
  expect_values(ones_23.tril(std::numeric_limits<int64_t>::min()), std::vector<double>(6, 0.0));
  expect_values(ones_23.tril(std::numeric_limits<int64_t>::max()), std::vector<double>(6, 1.0));
  EXPECT_EQ(zeros({2, 3, 0}, TensorOptions().device(dev_)).tril().sizes(), (IntList{2, 3, 0}));
  EXPECT_EQ(zeros({0, 3}, TensorOptions().device(dev_)).triu().sizes(), (IntList{0, 3}));
  Tensor big = randn({3, 4, 5, 6}, TensorOptions(kFloat32).device(dev_));
  const TensorOptions index = TensorOptions(kInt64).device(dev_);
  for (Tensor v : {big, big.permute({2, 0, 3, 1}), big.transpose(-1, -2), big.narrow(3, 1, 4)}) {
    for (int64_t k : {-2, 0, 3}) {
      Tensor offset = arange(v.size(-1), index) - arange(v.size(-2), index).unsqueeze(1);
      EXPECT_TRUE(v.triu(k).equal(where(offset.ge(k), v, 0))) << k;
      EXPECT_TRUE(v.tril(k).equal(where(offset.le(k), v, 0))) << k;
      EXPECT_TRUE(v.triu(k).is_contiguous());
    }
  }
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
