// F::embedding and index_add_/index_add: values and gradients against PyTorch 1.13
// (transformer_ops_expected.py), float64 gradcheck, padding_idx, determinism, errors
// (the cpu's IndexError, the cuda devices' asynchronous device-side assert), cuda devices
// against the cpu.
#include "transformer_test_util.h"

using namespace ember;
using ember::testing::dot;
using ember::testing::expect_gradcheck;
using ember::testing::expect_values;
using ember::testing::seq;
namespace E = transformer_expected;
namespace F = ember::nn::functional;

namespace {

using Ts = std::vector<Tensor>;

class Embedding : public ember::testing::OnDevice {
 protected:
  Tensor I(const TensorData& d) { return tensor(d, TensorOptions(kInt64).device(dev_)); }
};

TEST_P(Embedding, ValuesAndPaddingGradMatchPyTorch) {
  Tensor w = seq({6, 3}, 0.1, dev_).requires_grad_(true);
  Tensor idx = I(TensorData({1, 5, 0, 5, 5, 2})).reshape({2, 3});
  Tensor y = F::embedding(idx, w, 5);
  EXPECT_EQ(y.sizes(), (IntList{2, 3, 3}));
  EXPECT_EQ(y.grad_fn()->name(), "EmbeddingBackward0");
  EXPECT_NEAR(dot(y, 0.5), E::kEmbeddingOut[0], 1e-12);
  (y * seq(y.sizes(), 0.5, dev_)).sum().backward();
  expect_values("weight grad", w.grad(), E::kEmbeddingWeightGrad, 1e-12);
  // Row 1 of the output is row 5 of the weight: rows at padding_idx are looked up as usual.
  EXPECT_TRUE(equal(y[0][1].detach(), w[5].detach()));
}

TEST_P(Embedding, NegativePaddingIdxAndInt32Indices) {
  Tensor w = seq({4, 2}, 0.2, dev_).requires_grad_(true);
  Tensor idx = tensor(TensorData(std::vector<int32_t>{3, 0, 3}), TensorOptions(kInt32).device(dev_));
  F::embedding(idx, w, -1).sum().backward();
  std::vector<double> grad = w.grad().to(Device(kCPU)).to_vector<double>();
  EXPECT_EQ(grad, (std::vector<double>{1, 1, 0, 0, 0, 0, 0, 0}));  // row 3 (= -1) gets nothing
}

TEST_P(Embedding, NonContiguousIndicesAndWeight) {
  Tensor w = seq({3, 8}, 0.3, dev_).t();                               // [8, 3], strided
  Tensor idx = I(TensorData({7, 1, 2, 0, 5, 4})).reshape({2, 3}).t();  // [3, 2], strided
  Tensor y = F::embedding(idx, w);
  Tensor expected = w.contiguous().index_select(0, idx.contiguous().reshape({-1})).reshape({3, 2, 3});
  EXPECT_TRUE(equal(y, expected));
}

TEST_P(Embedding, Gradcheck) {
  Tensor idx = I(TensorData({2, 0, 2, 3, 1})).reshape({5, 1});
  expect_gradcheck("embedding", [idx](const Ts& x) { return Ts{F::embedding(idx, x[0])}; },
                   {seq({4, 3}, 0.1, dev_).requires_grad_(true)});
}

TEST_P(Embedding, Errors) {
  Tensor w = ones({5, 3}, TensorOptions(kFloat32).device(dev_));
  EXPECT_THROW_MSG(F::embedding(ones({1}, TensorOptions(kFloat32).device(dev_)), w), TypeError,
                   "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int");
  EXPECT_THROW_MSG(F::embedding(I(TensorData({1})), ones({5}, TensorOptions(kFloat32).device(dev_))), ValueError,
                   "'weight' must be 2-D");
  EXPECT_THROW_MSG(F::embedding(I(TensorData({1})), w, 5), ValueError, "Padding_idx must be within num_embeddings");
  EXPECT_THROW_MSG(F::embedding(I(TensorData({1})), w, -6), ValueError, "Padding_idx must be within num_embeddings");
}

TEST_P(Embedding, IndexAddMatchesPyTorch) {
  Tensor x = seq({5, 3}, 0.1, dev_);
  x.index_add_(0, I(TensorData({4, 0, 4, 2})), seq({4, 3}, 0.2, dev_), 2);
  expect_values("index_add_ dim 0", x, E::kIndexAddDim0, 1e-12);
  Tensor y = seq({3, 4}, 0.3, dev_);
  Tensor r = y.index_add(1, I(TensorData({3, 3, 1})), seq({3, 3}, 0.4, dev_));
  expect_values("index_add dim 1", r, E::kIndexAddDim1, 1e-12);
  EXPECT_TRUE(equal(y, seq({3, 4}, 0.3, dev_)));  // the out-of-place form leaves self alone
}

TEST_P(Embedding, IndexAddNonContiguousAndIntegers) {
  // Into a transposed self, from a strided source.
  Tensor self = zeros({4, 3}, TensorOptions(kFloat64).device(dev_)).t();  // [3, 4]
  Tensor source = seq({2, 6}, 0.5, dev_).narrow(1, 0, 3).t();             // [3, 2]
  self.index_add_(1, I(TensorData({3, 0})), source);
  Tensor expected = zeros({3, 4}, TensorOptions(kFloat64).device(dev_));
  expected.select(1, 3).copy_(source.select(1, 0));
  expected.select(1, 0).copy_(source.select(1, 1));
  EXPECT_TRUE(equal(self, expected));
  Tensor counts = zeros({3}, TensorOptions(kInt64).device(dev_));
  counts.index_add_(0, I(TensorData({0, 2, 2, 2})), ones({4}, TensorOptions(kInt64).device(dev_)));
  EXPECT_EQ(counts.to(Device(kCPU)).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3}));
}

TEST_P(Embedding, IndexAddGradients) {
  auto R = [&](const IntList& s, double c) { return seq(s, c, dev_).requires_grad_(true); };
  Tensor idx = I(TensorData({1, 1, 0}));
  expect_gradcheck("index_add", [idx](const Ts& x) { return Ts{x[0].index_add(0, idx, x[1], 1.5)}; },
                   {R({2, 3}, 0.1), R({3, 3}, 0.2)});
  expect_gradcheck("index_add_ (on a non-leaf)",
                   [idx](const Ts& x) {
                     Tensor y = x[0] * 1;
                     y.index_add_(1, idx, x[1]);
                     return Ts{y};
                   },
                   {R({3, 2}, 0.3), R({3, 3}, 0.4)});
  Tensor leaf = R({2, 3}, 0.1);
  EXPECT_THROW(leaf.index_add_(0, idx, seq({3, 3}, 0.2, dev_)), Error);  // a leaf that requires grad
}

TEST_P(Embedding, IndexAddErrors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor x = zeros({4, 3}, o);
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({1})).reshape({1, 1}), ones({1, 3}, o)), IndexError,
                   "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]");
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({1, 2})), ones({1, 3}, o)), ValueError,
                   "index_add_(): Number of indices (2) should be equal to source.size(dim): (1), for dim: 0");
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({1})), ones({1, 3}, TensorOptions(kFloat64).device(dev_))), TypeError,
                   "index_add_(): self (Float) and source (Double) must have the same scalar type");
  EXPECT_THROW_MSG(x.index_add_(0, ones({1}, o), ones({1, 3}, o)), TypeError,
                   "index_add_(): Expected dtype int32/int64 for index but got: Float");
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({1})), ones({1, 2}, o)), ValueError,
                   "source tensor shape must match self tensor shape");
  EXPECT_THROW(x.index_add_(2, I(TensorData({1})), ones({1, 3}, o)), IndexError);
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({0, 1, 2, 3})), x), ValueError,
                   "some elements of the input tensor and the written-to tensor refer to a single memory location");
  EXPECT_THROW_MSG(x.index_add_(0, I(TensorData({0, 1})), x.narrow(0, 1, 2)), ValueError,
                   "some elements of the input tensor and the written-to tensor refer to a single memory location");
  EXPECT_EQ(x.abs().sum().item<float>(), 0.0f);  // nothing was written
}

EMBER_ON_DEVICES(Embedding, "cpu", "cuda:0");

TEST(EmbeddingErrors, OutOfRangeOnCpuIsIndexError) {
  Tensor w = ones({5, 3});
  EXPECT_THROW_MSG(F::embedding(tensor({0, 5}), w), IndexError, "index out of range in self");
  EXPECT_THROW_MSG(F::embedding(tensor({-1}), w), IndexError, "index out of range in self");
  Tensor x = zeros({4, 3});
  EXPECT_THROW_MSG(x.index_add_(0, tensor({4}), ones({1, 3})), IndexError, "index out of range in self");
  EXPECT_EQ(x.sum().item<float>(), 0.0f);
}

TEST(EmbeddingErrors, OutOfRangeOnCudaIsAnAsynchronousDeviceAssert) {
  EMBER_REQUIRE_DEVICES(2);
  Device d("cuda:1");
  Tensor w = ones({5, 3}, TensorOptions(kFloat32).device(d));
  Tensor y;
  EXPECT_NO_THROW(y = F::embedding(tensor({0, 9}).to(d), w));  // enqueued, not yet run
  EXPECT_THROW_MSG(cuda::synchronize(1), CudaError, "device-side assert triggered");
  cuda::reset_device(1);
  Tensor x = zeros({4, 3}, TensorOptions(kFloat32).device(d));
  EXPECT_NO_THROW(x.index_add_(0, tensor({7}).to(d), ones({1, 3}, TensorOptions(kFloat32).device(d))));
  EXPECT_THROW_MSG(cuda::synchronize(1), CudaError, "device-side assert triggered");
  cuda::reset_device(1);
}

TEST(EmbeddingDevices, CudaEqualsCpuAndIsDeterministic) {
  EMBER_REQUIRE_DEVICES(1);
  Device d("cuda:0");
  // Many repeats of few rows: the weight gradient sums in index order, so it is the same
  // bit for bit on every run and backend.
  std::vector<int64_t> ids(4096);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7) % 5);
  Tensor idx = tensor(TensorData(ids)).reshape({64, 64});
  auto grad_on = [&](Device dev) {
    Tensor w = seq({5, 16}, 0.1, dev, kFloat32).requires_grad_(true);
    (F::embedding(idx.to(dev), w) * seq({64, 64, 16}, 0.5, dev, kFloat32)).sum().backward();
    return w.grad().to(Device(kCPU));
  };
  Tensor cpu = grad_on(Device(kCPU));
  EXPECT_TRUE(equal(grad_on(d), cpu));
  EXPECT_TRUE(equal(grad_on(d), grad_on(d)));
}

}  // namespace
