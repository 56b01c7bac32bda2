// Every op against hand-computed values, on cpu and on a cuda device (the same suite).
#include <cmath>

#include "test_support.h"

using namespace ember;

namespace {

class Ops : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, DType dtype = kFloat32) { return tensor(d, TensorOptions(dtype).device(dev_)); }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
  static std::vector<int64_t> I(const Tensor& t) { return t.to_vector<int64_t>(); }
  static std::vector<bool> B(const Tensor& t) { return t.to_vector<bool>(); }
};

TEST_P(Ops, Arithmetic) {
  auto a = T({1, 2, 3}), b = T({4, 5, 6});
  EXPECT_EQ(F(a + b), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(F(a - b), (std::vector<float>{-3, -3, -3}));
  EXPECT_EQ(F(a * b), (std::vector<float>{4, 10, 18}));
  EXPECT_EQ(F(b / a), (std::vector<float>{4, 2.5, 2}));
  EXPECT_EQ(F(add(a, b, 2)), (std::vector<float>{9, 12, 15}));
  EXPECT_EQ(F(a + 1), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(F(10 - a), (std::vector<float>{9, 8, 7}));
  EXPECT_EQ(F(a * 0.5), (std::vector<float>{0.5, 1, 1.5}));
  EXPECT_EQ(F(6 / a), (std::vector<float>{6, 3, 2}));
  EXPECT_EQ(F(a / 2), (std::vector<float>{0.5, 1, 1.5}));
  EXPECT_EQ(F(-a), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(F(pow(a, 2)), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(F(pow(a, b)), (std::vector<float>{1, 32, 729}));
  EXPECT_EQ(a.device(), (a + b).device());
}

TEST_P(Ops, InPlace) {
  auto a = T({1, 2, 3});
  a += T({1, 1, 1});
  a *= 2;
  a -= 1;
  a /= T({1, 2, 1});
  EXPECT_EQ(F(a), (std::vector<float>{3, 2.5, 7}));
  auto i = T({1, 2}, kInt64);
  EXPECT_THROW_MSG(i.div_(T({2, 2}, kInt64)), TypeError, "can't be cast to the desired output type");
  EXPECT_EQ(I(i), (std::vector<int64_t>{1, 2}));  // left intact
  auto m = zeros({2, 2}, dev_);
  m.add_(T({1, 2}));  // broadcast into self
  EXPECT_EQ(F(m), (std::vector<float>{1, 2, 1, 2}));
  EXPECT_THROW_MSG(T({1, 2}).add_(zeros({2, 2}, dev_)), ValueError, "doesn't match the broadcast shape");
}

TEST_P(Ops, Unary) {
  auto x = T({-1, 0, 4});
  EXPECT_EQ(F(x.abs()), (std::vector<float>{1, 0, 4}));
  EXPECT_EQ(F(x.relu()), (std::vector<float>{0, 0, 4}));
  EXPECT_EQ(F(T({0, 4, 9}).sqrt()), (std::vector<float>{0, 2, 3}));
  auto e = F(T({0, 1}).exp());
  EXPECT_FLOAT_EQ(e[1], std::exp(1.f));
  EXPECT_FLOAT_EQ(F(T({1, 2}).log())[1], std::log(2.f));
  EXPECT_FLOAT_EQ(F(T({0}).sigmoid())[0], 0.5f);
  EXPECT_FLOAT_EQ(F(T({1}).tanh())[0], std::tanh(1.f));
  EXPECT_EQ(T({1, 4}, kInt64).sqrt().dtype(), kFloat32);  // integer inputs promote to float
  auto z = tensor({std::complex<double>(3, 4)}, TensorOptions(kComplex64).device(dev_)).abs();
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_EQ(F(z), (std::vector<float>{5}));
  EXPECT_THROW_MSG(neg(T({1, 0}, kBool)), TypeError, "Negation, the `-` operator, on a bool tensor");
}

TEST_P(Ops, PromotionAndBroadcast) {
  auto i = T({1, 2, 3}, kInt64);
  auto f = T({0.5}, kFloat32);
  EXPECT_EQ((i + f).dtype(), kFloat32);
  EXPECT_EQ((i + 1).dtype(), kInt64);
  EXPECT_EQ((i + 1.5).dtype(), kFloat32);
  EXPECT_EQ((i / 2).dtype(), kFloat32);
  EXPECT_EQ((T({1}, kInt32) + T({1}, kInt64)).dtype(), kInt64);
  EXPECT_EQ((T({1}, kFloat32) + tensor(1.0, kFloat64)).dtype(), kFloat32);  // 0-dim cpu tensor joins as a scalar
  EXPECT_EQ(F(i + f), (std::vector<float>{1.5, 2.5, 3.5}));
  auto col = T({{1}, {2}}), row = T({10, 20, 30});
  auto s = col + row;
  EXPECT_EQ(s.sizes(), (IntList{2, 3}));
  EXPECT_EQ(F(s), (std::vector<float>{11, 21, 31, 12, 22, 32}));
  EXPECT_THROW_MSG(T({1, 2}) + T({1, 2, 3}), ValueError,
                   "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
}

TEST_P(Ops, Comparisons) {
  auto a = T({1, 2, 3}), b = T({3, 2, 1});
  EXPECT_EQ(B(a.eq(b)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(B(a.ne(b)), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(B(a.lt(b)), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(B(a.le(b)), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(B(a.gt(b)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(B(a.ge(b)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(B(a.gt(1.5)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(a.eq(b).dtype(), kBool);
  EXPECT_TRUE(allclose(a, T({1, 2, 3.000001})));
  EXPECT_FALSE(allclose(a, T({1, 2, 3.1})));
  EXPECT_TRUE(equal(a, T({1, 2, 3})));
  EXPECT_FALSE(equal(a, T({1, 2})));
}

TEST_P(Ops, Reductions) {
  auto x = T({{1, 5, 3}, {4, 2, 6}});
  EXPECT_EQ(x.sum().item<float>(), 21);
  EXPECT_EQ(F(x.sum(0)), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(F(x.sum(1)), (std::vector<float>{9, 12}));
  EXPECT_EQ(x.sum(1, true).sizes(), (IntList{2, 1}));
  EXPECT_EQ(x.mean().item<float>(), 3.5);
  EXPECT_EQ(F(x.mean(-1)), (std::vector<float>{3, 4}));
  EXPECT_EQ(x.max().item<float>(), 6);
  EXPECT_EQ(F(x.max(0)), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(x.min().item<float>(), 1);
  EXPECT_EQ(F(x.min(1)), (std::vector<float>{1, 2}));
  EXPECT_EQ(F(x.t().sum(1)), (std::vector<float>{5, 7, 9}));  // strided input
  EXPECT_EQ(T({1, 2, 3}, kInt32).sum().dtype(), kInt64);
  EXPECT_EQ(T({1, 0, 1}, kBool).sum().item<int64_t>(), 2);
  EXPECT_THROW_MSG(T({1, 2}, kInt64).mean(), TypeError, "mean(): could not infer output dtype");
  EXPECT_THROW_MSG(empty({0}, dev_).max(), ValueError, "Expected reduction dim to be specified");
  EXPECT_THROW_MSG(x.sum(2), IndexError, "Dimension out of range");
}

TEST_P(Ops, Matmul) {
  auto a = T({{1, 2}, {3, 4}, {5, 6}});
  auto b = T({{1, 0, 2}, {0, 1, 3}});
  auto c = a.matmul(b);
  EXPECT_EQ(c.sizes(), (IntList{3, 3}));
  EXPECT_EQ(F(c), (std::vector<float>{1, 2, 8, 3, 4, 18, 5, 6, 28}));
  EXPECT_EQ(F(a.t().matmul(a)), (std::vector<float>{35, 44, 44, 56}));  // transposed operand
  EXPECT_EQ(F(T({1, 2}).matmul(T({3, 4}))), (std::vector<float>{11}));  // 1-D dot
  EXPECT_EQ(T({1, 2}).matmul(T({3, 4})).dim(), 0);
  EXPECT_EQ(F(a.matmul(T({1, 1}))), (std::vector<float>{3, 7, 11}));
  // Batched with broadcasting: (2, 3, 2) @ (2, 3).
  auto batch = a.unsqueeze(0).expand({2, 3, 2}) * T({{{1}}, {{2}}});
  auto bc = batch.matmul(b);
  EXPECT_EQ(bc.sizes(), (IntList{2, 3, 3}));
  EXPECT_EQ(F(bc.select(0, 1)), F(c * 2));
  EXPECT_EQ(I(T({{1, 2}}, kInt64).matmul(T({{3}, {4}}, kInt64))), (std::vector<int64_t>{11}));
  EXPECT_THROW_MSG(a.matmul(a), ValueError, "mat1 and mat2 shapes cannot be multiplied (3x2 and 3x2)");
  EXPECT_THROW_MSG(a.matmul(b.to(kFloat64)), TypeError, "expected m1 and m2 to have the same dtype");
}

TEST_P(Ops, IndexSelectAndRandom) {
  auto x = T({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(F(x.index_select(1, T({2, 0}, kInt64))), (std::vector<float>{3, 1, 6, 4}));
  EXPECT_EQ(F(x.index_select(0, T({1}, kInt32))), (std::vector<float>{4, 5, 6}));
  EXPECT_THROW_MSG(x.index_select(0, T({0.5})), TypeError, "Expected dtype int32 or int64 for index");
  manual_seed(7);
  auto r1 = rand({1000}, dev_);
  manual_seed(7);
  auto r2 = rand({1000}, dev_);
  EXPECT_TRUE(equal(r1, r2));
  EXPECT_GE(r1.min().item<float>(), 0.f);
  EXPECT_LT(r1.max().item<float>(), 1.f);
  auto n = randn({20000}, dev_);
  EXPECT_NEAR(n.mean().item<float>(), 0.0, 0.05);
  EXPECT_NEAR((n * n).mean().item<float>(), 1.0, 0.05);
}

TEST_P(Ops, SameSeedSameNumbersOnEveryDevice) {
  manual_seed(123);
  auto here = randn({64}, dev_);
  manual_seed(123);
  auto on_cpu = randn({64});
  EXPECT_TRUE(equal(here.cpu(), on_cpu));
}

EMBER_ON_DEVICES(Ops, "cpu", "cuda:0", "cuda:1");

}  // namespace

namespace {

class OpsEdgeCases : public Ops {};

TEST_P(OpsEdgeCases, ScalarsKeepTheirPrecision) {
  auto d = T({0.1}, kFloat64);
  EXPECT_TRUE(d.eq(0.1).item<bool>());
  EXPECT_EQ((T({1.}, kFloat64) / 0.1).item<double>(), 10.0);
  auto h = tensor(3.0, TensorOptions(kFloat16).device(dev_));
  EXPECT_EQ((h / 2.0).dtype(), kFloat16);
}

TEST_P(OpsEdgeCases, InPlaceCastsAndOverlap) {
  auto h = T({1, 2}, kFloat16);
  h.add_(T({0.5, 0.5}, kFloat32));  // computed in float32, written back as float16
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_EQ(F(h), (std::vector<float>{1.5, 2.5}));
  auto i = T({1, 2}, kInt32);
  i.add_(T({1, 1}, kInt64));
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{2, 3}));
  EXPECT_THROW_MSG(i.add_(T({0.5, 0.5})), TypeError, "can't be cast to the desired output type");
  auto x = T({{1, 2}, {3, 4}});
  EXPECT_THROW_MSG(x.add_(x.t()), ValueError, "refer to a single memory location");
  EXPECT_EQ(F(x), (std::vector<float>{1, 2, 3, 4}));  // left intact
  auto e = T({1, 2}).expand({3, 2});
  EXPECT_THROW_MSG(e.add_(ones({3, 2}, dev_)), ValueError,
                   "more than one element of the written-to tensor refers to a single memory location");
  x.copy_(x);                           // the same view: nothing to do
  x.select(1, 0).add_(x.select(1, 1));  // interleaved columns do not share elements
  EXPECT_EQ(F(x), (std::vector<float>{3, 2, 7, 4}));
  EXPECT_THROW_MSG(T({true}, kBool) - T({1}, kInt64), TypeError, "with a bool tensor is not supported");
  EXPECT_THROW_MSG(1 - T({true}, kBool), TypeError, "with a bool tensor is not supported");
}

TEST_P(OpsEdgeCases, ZeroDimTensors) {
  auto s = tensor(3.0, TensorOptions().device(dev_));
  EXPECT_EQ(s.view({1}).sizes(), (IntList{1}));
  EXPECT_EQ(s.reshape({1, 1}).sizes(), (IntList{1, 1}));
  EXPECT_EQ(s.flatten().item<float>(), 3.f);
  EXPECT_THROW_MSG(s.size(0), IndexError, "dimension specified as 0 but tensor has no dimensions");
  EXPECT_EQ(s.index_select(0, T({0}, kInt64)).item<float>(), 3.f);
  EXPECT_THROW_MSG(s.index_select(0, T({0, 0}, kInt64)), IndexError, "Index to scalar can have only 1 value");
  EXPECT_THROW_MSG(s.as_strided({2}, {1}, 0), ValueError, "require a storage of 2 elements");
  EXPECT_TRUE(empty({0, 3}, dev_).t().is_contiguous());
}

EMBER_ON_DEVICES(OpsEdgeCases, "cpu", "cuda:0");

TEST(CopiesToHost, NonBlockingLandsInPinnedMemory) {
  ember::testing::ensure_cuda();
  auto d = arange(8, TensorOptions(kFloat32).device("cuda:0"));
  auto h = d.to(Device(kCPU), /*non_blocking=*/true);
  EXPECT_TRUE(h.is_pinned());
  cuda::current_stream(0).synchronize();
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(d.cpu().is_pinned());
}

}  // namespace
