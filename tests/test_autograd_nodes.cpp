// Autograd nodes of composed ops (split, chunk, stack, addmm, linear), the gradients of
// max/min on ties and the layout of matmul gradients, on cpu and on a cuda device.
// Expected names and values are taken from PyTorch 1.13 (/usr/bin/python3, import torch);
// where PyTorch 2.x differs, the test says so.
#include "test_support.h"

using namespace ember;

namespace {

class AutogradNodes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "cpu") ember::testing::ensure_cuda();
    dev_ = Device(GetParam());
    if (dev_.is_cuda() && dev_.index() >= cuda::device_count()) GTEST_SKIP() << "needs device " << dev_;
  }
  Tensor T(const TensorData& d, bool grad = false) {
    return tensor(d, TensorOptions(kFloat32).device(dev_).requires_grad(grad));
  }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
  Device dev_{kCPU};
};

TEST_P(AutogradNodes, SplitChunkAndStackAreOneNodeEach) {
  auto x = T({0, 1, 2, 3, 4, 5}, true);
  for (const Tensor& part : x.split(2)) EXPECT_EQ(part.grad_fn()->name(), "SplitBackward0");
  for (const Tensor& part : x.chunk(4)) EXPECT_EQ(part.grad_fn()->name(), "SplitBackward0");
  auto parts = x.split(IntList{2, 4});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].grad_fn()->name(), "SplitWithSizesBackward0");
  EXPECT_EQ(parts[0].grad_fn(), parts[1].grad_fn());  // one node, two outputs
  EXPECT_EQ(parts[1].output_nr(), 1u);
  EXPECT_EQ(parts[1].data_ptr(), static_cast<char*>(x.data_ptr()) + 2 * sizeof(float));  // still views
  // Only part 1 is used: part 0's gradient is zero.
  (parts[1] * T({1, 2, 3, 4})).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{0, 0, 1, 2, 3, 4}));

  auto a = T({1, 2}, true), c = T({3, 4}, true);
  auto s = stack({a, c}, 1);
  EXPECT_EQ(s.grad_fn()->name(), "StackBackward0");
  EXPECT_EQ(s.grad_fn()->next_edges().size(), 2u);
  (s * T({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{1, 3}));
  EXPECT_EQ(F(c.grad()), (std::vector<float>{2, 4}));
}

TEST_P(AutogradNodes, AddmmAndLinearRecordAddmmBackward) {
  auto b = T({1, 2}, true);
  auto m1 = T({{1, 2, 3}, {4, 5, 6}}, true);
  auto m2 = T({{1, -1}, {2, 0}, {0, 3}}, true);
  auto y = addmm(b, m1, m2, 2, 3);
  EXPECT_EQ(y.grad_fn()->name(), "AddmmBackward0");
  EXPECT_EQ(F(y), (std::vector<float>{17, 28, 44, 46}));
  (y * T({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_EQ(F(b.grad()), (std::vector<float>{8, 12}));
  EXPECT_EQ(F(m1.grad()), (std::vector<float>{-3, 6, 18, -3, 18, 36}));
  EXPECT_EQ(F(m2.grad()), (std::vector<float>{39, 54, 51, 72, 63, 90}));

  namespace Fn = nn::functional;
  auto x = T({{1, 2}, {3, 4}, {5, 6}}, true);
  auto w = T({{1, 0}, {0, 2}, {1, 1}}, true);
  auto bias = T({0.5, 0.5, 0.5}, true);
  auto out = Fn::linear(x, w, bias);
  ASSERT_EQ(out.grad_fn()->name(), "AddmmBackward0");
  EXPECT_EQ(out.grad_fn()->next_edges().at(2).function->name(), "TBackward0");
  (out * out).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{10, 25, 22, 49, 34, 73}));
  EXPECT_EQ(F(w.grad()), (std::vector<float>{79, 100, 185, 236, 167, 212}));
  EXPECT_TRUE(w.grad().is_contiguous());  // computed in the layout of w, not copied into it
  EXPECT_EQ(F(bias.grad()), (std::vector<float>{21, 51, 45}));
  EXPECT_EQ(Fn::linear(x, w).grad_fn()->name(), "MmBackward0");
  auto x3 = T({{{1, 2}, {3, 4}}}, true);
  EXPECT_EQ(Fn::linear(x3, w, bias).grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(bmm(x3, T({{{1}, {2}}})).grad_fn()->name(), "BmmBackward0");
}

TEST_P(AutogradNodes, MatmulGradientsOfTransposedOperandsKeepTheirLayout) {
  // a.t() and b.t() are column-major: their gradients come out column-major too, so the
  // gradients of a and b are contiguous (values: PyTorch 1.13).
  auto a = T({{1, 2}, {3, 4}, {5, 6}}, true);  // a.t(): 2x3
  auto b = T({{1, 0, 2}, {0, 1, 1}}, true);    // b.t(): 3x2
  auto y = a.t().matmul(b.t());
  (y * T({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_TRUE(a.grad().is_contiguous());
  EXPECT_TRUE(b.grad().is_contiguous());
  EXPECT_EQ(F(a.grad()), (std::vector<float>{1, 3, 2, 4, 4, 10}));
  EXPECT_EQ(F(b.grad()), (std::vector<float>{7, 15, 23, 10, 22, 34}));
}

TEST_P(AutogradNodes, MaxAndMinAlongADimGiveTheGradientToTheReturnedIndex) {
  // PyTorch 1.13: t.max(1) returns indices [1, 0, 0], t.min(0) returns [0, 1, 1].
  auto t = T({{1, 3, 3}, {2, 2, 1}, {5, 5, 5}}, true);
  EXPECT_EQ(t.max(1).grad_fn()->name(), "MaxBackward0");
  t.max(1).sum().backward();
  EXPECT_EQ(F(t.grad()), (std::vector<float>{0, 1, 0, 1, 0, 0, 1, 0, 0}));
  t.mutable_grad() = {};
  t.min(0).sum().backward();
  EXPECT_EQ(F(t.grad()), (std::vector<float>{1, 0, 0, 0, 1, 1, 0, 0, 0}));
  t.mutable_grad() = {};
  t.max(1, /*keepdim=*/true).sum().backward();
  EXPECT_EQ(F(t.grad()), (std::vector<float>{0, 1, 0, 1, 0, 0, 1, 0, 0}));
}

TEST_P(AutogradNodes, FullMaxAndMinShareTheGradientAmongTies) {
  // PyTorch (1.13 and 2.x): evenly distributed among the tied elements.
  auto t = T({{1, 3, 3}, {2, 2, 1}, {5, 5, 5}}, true);
  t.max().backward();
  auto g = F(t.grad());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g[static_cast<size_t>(i)], 0.0f);
  for (int i = 6; i < 9; ++i) EXPECT_FLOAT_EQ(g[static_cast<size_t>(i)], 1.0f / 3);
  t.mutable_grad() = {};
  t.min().backward();
  EXPECT_EQ(F(t.grad()), (std::vector<float>{0.5, 0, 0, 0, 0, 0.5, 0, 0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Devices, AutogradNodes, ::testing::Values("cpu", "cuda:0"),
                         [](const auto& info) { return info.param == "cpu" ? std::string("cpu") : std::string("cuda"); });

}  // namespace
