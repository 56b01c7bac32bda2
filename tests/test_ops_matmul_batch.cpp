// matmul broadcasting over batch dims (3-D and 4-D, with 1-D and 2-D operands) and
// baddbmm: values and gradients against PyTorch 1.13 (transformer_ops_expected.py),
// float64 gradcheck, non-contiguous operands, errors, and cuda devices against the cpu.
#include <limits>

#include "transformer_test_util.h"

using namespace ember;
using ember::testing::expect_case;
using ember::testing::expect_gradcheck;
using ember::testing::seq;
namespace E = transformer_expected;

namespace {

using Ts = std::vector<Tensor>;

class MatmulBatch : public ember::testing::OnDevice {};

Tensor mm2(const Ts& x) { return matmul(x[0], x[1]); }

TEST_P(MatmulBatch, BroadcastValuesAndGradsMatchPyTorch) {
  expect_case("4-D @ 2-D", mm2, {{{2, 3, 4, 5}, 0.1}, {{5, 3}, 0.2}}, E::kMatmul4dBy2d, dev_);
  expect_case("[2,1,4,5] @ [3,5,2]", mm2, {{{2, 1, 4, 5}, 0.3}, {{3, 5, 2}, 0.4}}, E::kMatmulBroadcast, dev_);
  expect_case("1-D @ 3-D", mm2, {{{4}, 0.5}, {{2, 4, 3}, 0.6}}, E::kMatmulVectorBy3d, dev_);
  expect_case("3-D @ 1-D", mm2, {{{2, 3, 4}, 0.7}, {{4}, 0.8}}, E::kMatmul3dByVector, dev_);
  expect_case("3-D @ 4-D", mm2, {{{3, 4, 5}, 0.9}, {{2, 1, 5, 2}, 1.0}}, E::kMatmul3dBy4d, dev_);
}

TEST_P(MatmulBatch, ShapesOfBroadcastProducts) {
  auto o = TensorOptions(kFloat32).device(dev_);
  EXPECT_EQ(matmul(ones({2, 1, 4, 5}, o), ones({3, 5, 2}, o)).sizes(), (IntList{2, 3, 4, 2}));
  EXPECT_EQ(matmul(ones({5}, o), ones({2, 3, 5, 6}, o)).sizes(), (IntList{2, 3, 6}));
  EXPECT_EQ(matmul(ones({2, 3, 4, 5}, o), ones({5}, o)).sizes(), (IntList{2, 3, 4}));
  Tensor r = matmul(ones({2, 1, 4, 5}, o), ones({3, 5, 2}, o));
  EXPECT_EQ(r.sum().item<float>(), 2 * 3 * 4 * 2 * 5.0f);
}

TEST_P(MatmulBatch, NonContiguousOperands) {
  // Transposed, sliced and expanded operands give the contiguous operands' product.
  Tensor a = seq({2, 3, 5, 4}, 0.1, dev_).transpose(-2, -1);  // [2, 3, 4, 5]
  Tensor b = seq({3, 10, 2}, 0.2, dev_).narrow(1, 0, 5);      // [3, 5, 2], strided
  Tensor expected = matmul(a.contiguous(), b.contiguous());
  EXPECT_TRUE(allclose(matmul(a, b), expected, 1e-12, 1e-12));
  // A 4-D @ 2-D product folds a's batch dims into its rows (a copy where they cannot fold).
  Tensor w = seq({3, 5}, 0.4, dev_).t();  // [5, 3], column-major
  EXPECT_TRUE(allclose(matmul(a, w), matmul(a.contiguous(), w.contiguous()), 1e-12, 1e-12));
  EXPECT_EQ(matmul(a, w).sizes(), (IntList{2, 3, 4, 3}));
  Tensor e = seq({1, 5, 2}, 0.3, dev_).expand({3, 5, 2});
  EXPECT_TRUE(allclose(matmul(a, e), matmul(a, e.contiguous()), 1e-12, 1e-12));
}

TEST_P(MatmulBatch, Gradcheck) {
  auto R = [&](const IntList& s, double c) { return seq(s, c, dev_).requires_grad_(true); };
  expect_gradcheck("4-D @ 2-D", mm2, {R({2, 3, 2, 3}, 0.1), R({3, 2}, 0.2)});
  expect_gradcheck("transposed 3-D @ 2-D", [](const Ts& x) { return matmul(x[0].transpose(0, 1), x[1]); },
                   {R({3, 2, 3}, 0.3), R({3, 2}, 0.2)});
  expect_gradcheck("[2,1,2,3] @ [3,3,2]", mm2, {R({2, 1, 2, 3}, 0.3), R({3, 3, 2}, 0.4)});
  expect_gradcheck("1-D @ 4-D", mm2, {R({3}, 0.5), R({2, 2, 3, 2}, 0.6)});
  expect_gradcheck("4-D @ 1-D", mm2, {R({2, 2, 2, 3}, 0.7), R({3}, 0.8)});
  expect_gradcheck("baddbmm", [](const Ts& x) { return Ts{baddbmm(x[0], x[1], x[2], 0.5, 1.5)}; },
                   {R({2, 3, 1}, 0.1), R({2, 3, 4}, 0.2), R({2, 4, 2}, 0.3)});
}

TEST_P(MatmulBatch, BaddbmmMatchesPyTorch) {
  expect_case(
      "baddbmm", [](const Ts& x) { return baddbmm(x[0], x[1], x[2], 0.5, 1.5); },
      {{{2, 3, 1}, 0.1}, {{2, 3, 4}, 0.2}, {{2, 4, 2}, 0.3}}, E::kBaddbmm, dev_);
  auto o = TensorOptions(kFloat64).device(dev_);
  Tensor a = seq({2, 3, 4}, 0.2, dev_), b = seq({2, 4, 2}, 0.3, dev_);
  Tensor out = baddbmm(seq({2, 3, 2}, 0.1, dev_), a, b);
  EXPECT_EQ(out.grad_fn(), nullptr);
  EXPECT_TRUE(allclose(out, seq({2, 3, 2}, 0.1, dev_) + matmul(a, b), 1e-12, 1e-12));
  // beta = 0 ignores the input: NaN there does not reach the result.
  Tensor nan_input = full({2, 3, 2}, std::numeric_limits<double>::quiet_NaN(), o);
  Tensor r = baddbmm(nan_input, a, b, 0.0, 2.0);
  EXPECT_TRUE(allclose(r, matmul(a, b) * 2, 1e-12, 1e-12));
  // The node is PyTorch's.
  Tensor x = seq({2, 3, 2}, 0.1, dev_).requires_grad_(true);
  EXPECT_EQ(baddbmm(x, a, b).grad_fn()->name(), "BaddbmmBackward0");
}

TEST_P(MatmulBatch, Errors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  EXPECT_THROW_MSG(matmul(ones({2, 3, 4}, o), ones({3, 4, 6}, o)), ValueError,
                   "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
  EXPECT_THROW_MSG(matmul(ones({2, 3, 4}, o), ones({2, 5, 6}, o)), ValueError, "cannot be multiplied");
  EXPECT_THROW_MSG(baddbmm(ones({2, 3, 4}, o), ones({2, 3, 5}, o), ones({2, 4, 4}, o)), ValueError,
                   "Expected size for first two dimensions of batch2 tensor to be: [2, 5] but got: [2, 4].");
  EXPECT_THROW_MSG(baddbmm(ones({2, 3, 4}, o), ones({3, 5}, o), ones({2, 5, 4}, o)), ValueError,
                   "batch1 must be a 3D tensor");
  EXPECT_THROW(baddbmm(ones({2, 3, 3}, o), ones({2, 3, 5}, o), ones({2, 5, 4}, o)), ValueError);
  EXPECT_THROW(baddbmm(ones({2, 3, 4}, o), ones({2, 3, 5}, TensorOptions(kFloat64).device(dev_)), ones({2, 5, 4}, o)),
               TypeError);
}

EMBER_ON_DEVICES(MatmulBatch, "cpu", "cuda:0");

TEST(MatmulBatchDevices, CudaEqualsCpu) {
  EMBER_REQUIRE_DEVICES(1);
  backends::cuda::matmul.allow_tf32 = false;
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor a = seq({2, 1, 4, 5}, 0.3, Device(kCPU), dtype), b = seq({3, 5, 2}, 0.4, Device(kCPU), dtype);
    Tensor c = matmul(a, b);
    Tensor d = matmul(a.to(Device("cuda:0")), b.to(Device("cuda:0"))).to(Device(kCPU));
    EXPECT_TRUE(allclose(c, d, 1e-6, 1e-6)) << dtype;
  }
}

}  // namespace
