// Autograd nodes of composed ops (split, chunk, stack, addmm, linear), the gradients of
// max/min on ties and the layout of matmul gradients, on cpu and on a cuda device.
// Expected names and values are taken from PyTorch 1.13 (/usr/bin/python3, import torch);
// where PyTorch 2.x differs, the test says so.
#include <limits>

#include "test_support.h"

using namespace ember;

namespace {

class AutogradNodes : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, bool grad = false) {
    return tensor(d, TensorOptions(kFloat32).device(dev_).requires_grad(grad));
  }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
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

  // As PyTorch, the parts of one split may not be changed in place when that is recorded.
  auto halves = (x * 1).split(3);
  EXPECT_THROW_MSG(halves[1] *= 2, Error,
                   "Output 1 of SplitBackward0 is a view and is being modified inplace. This view is the output of a "
                   "function that returns multiple views. Such functions do not allow the output views to be modified "
                   "inplace. You should replace the inplace operation by an out-of-place one.");
  auto zs = zeros({6}, dev_).chunk(3);
  EXPECT_THROW_MSG(zs[0].add_(x.slice(0, 0, 2)), Error,
                   "A view was created in no_grad mode and is being modified inplace with grad mode enabled.");
  zs[0] += 1;  // nothing to record: allowed
  EXPECT_EQ(F(zs[0]), (std::vector<float>{1, 1}));

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

TEST_P(AutogradNodes, ReluPassesTheGradientWhereTheInputIsAboveZeroOrNaN) {
  // PyTorch 1.13: relu(x).backward([inf, inf, 3, 4]) for x = [-1, 0, 2, nan] gives
  // x.grad = [0, 0, 3, 4] (threshold_backward: 0 where x <= 0, else the gradient).
  const float inf = std::numeric_limits<float>::infinity();
  auto x = T({-1.0f, 0.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()}, true);
  auto y = x.relu();
  EXPECT_EQ(y.grad_fn()->name(), "ReluBackward0");
  y.backward(T({inf, inf, 3.0f, 4.0f}));
  EXPECT_EQ(F(x.grad()), (std::vector<float>{0, 0, 3, 4}));
}

// In-place ops on views (PyTorch's CopySlices); values and names from PyTorch 1.13, where
// the view's node after the change is AsStridedBackward0 (as in 2.x on cpu and cuda, whose
// view replay is off by default).
TEST_P(AutogradNodes, InPlaceOnAViewRewritesTheBasesHistory) {
  auto a = T({1, 2, 3, 4}, true);
  auto b = a.clone();
  auto v = b.narrow(0, 0, 2);
  EXPECT_EQ(v.grad_fn()->name(), "SliceBackward0");
  v *= 2;
  ASSERT_NE(b.grad_fn(), nullptr);
  EXPECT_EQ(b.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(b.grad_fn()->next_edges().at(0).function->name(), "CloneBackward0");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  EXPECT_EQ(v.grad_fn()->next_edges().at(0).function, b.grad_fn());
  EXPECT_EQ(F(b), (std::vector<float>{2, 4, 3, 4}));
  b.sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{2, 2, 1, 1}));
}

TEST_P(AutogradNodes, InPlaceOnAViewWithATensorOperand) {
  auto weights = T({1, 10, 100, 1000});
  // self * other with other saved: d/da = [1, 3 * 10, 4 * 100, 1000] (PyTorch 1.13).
  auto a = T({1, 2, 3, 4}, true);
  auto b = a.clone();
  auto v = b.narrow(0, 1, 2);
  v.mul_(v.detach() + 1);
  (b * weights).sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{1, 30, 400, 1000}));

  // Only the view is used afterwards: its gradient goes through the base's new history.
  auto a2 = T({1, 2, 3, 4}, true);
  auto b2 = a2.clone();
  auto v2 = b2.slice(0, 1, 3);
  v2 *= 3;
  (v2 * T({5, 7})).sum().backward();
  EXPECT_EQ(F(a2.grad()), (std::vector<float>{0, 15, 21, 0}));

  // A base that does not require grad gets a history from the operand.
  auto x = T({2, 3}, true);
  auto base = zeros({4}, dev_);
  auto v3 = base.slice(0, 1, 3);
  v3.add_(x * x);
  EXPECT_TRUE(base.requires_grad());
  EXPECT_EQ(base.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v3.grad_fn()->name(), "AsStridedBackward0");
  (base * weights).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{40, 600}));

  // copy_ into a view: the overwritten region gets no gradient.
  auto a4 = T({1, 2, 3, 4}, true);
  auto y = T({9, 8}, true);
  auto b4 = a4.clone();
  b4.slice(0, 1, 3).copy_(y * 2);
  EXPECT_EQ(b4.grad_fn()->name(), "CopySlices");
  (b4 * weights).sum().backward();
  EXPECT_EQ(F(a4.grad()), (std::vector<float>{1, 0, 0, 1000}));
  EXPECT_EQ(F(y.grad()), (std::vector<float>{20, 200}));
}

TEST_P(AutogradNodes, ViewsOfViewsAndChangesOfTheBase) {
  // A view of a view rewrites the root base: d/da sum(b) with b.t()[0] *= 5 (PyTorch 1.13).
  auto a = T({{1, 2}, {3, 4}}, true);
  auto b = a.clone();
  auto v = b.t().select(0, 0);  // column 0 of b
  v *= 5;
  EXPECT_EQ(b.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  b.sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{5, 1, 5, 1}));

  // The base changes in place after the view was made: the view sees the new history.
  auto a2 = T({1, 2, 3, 4}, true);
  auto b2 = a2.clone();
  auto v2 = b2.slice(0, 0, 2);
  b2 *= 2;
  EXPECT_EQ(v2.grad_fn()->name(), "AsStridedBackward0");
  v2.sum().backward();
  EXPECT_EQ(F(a2.grad()), (std::vector<float>{2, 2, 0, 0}));
}

TEST_P(AutogradNodes, DoubleBackwardThroughAnInPlaceChangeOfAView) {
  // b = x with b[:2] *= x[:2]; loss = sum(b^2): g = [4x^3, 4x^3, 2x], d sum(g) = [12x^2, 12x^2, 2].
  auto x = T({1, 2, 3}, true);
  auto b = x * 1;
  b.narrow(0, 0, 2).mul_(x.narrow(0, 0, 2));
  auto g = autograd::grad({(b * b).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_EQ(F(g), (std::vector<float>{4, 32, 6}));
  g.sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{12, 48, 2}));
}

TEST_P(AutogradNodes, InPlaceOnAViewOfALeafIsRefused) {
  auto a = T({1, 2, 3, 4}, true);
  auto v = a.slice(0, 0, 2);
  EXPECT_THROW_MSG(v *= 2, Error,
                   "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_THROW_MSG(a.t().zero_(), Error,
                   "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_EQ(F(a), (std::vector<float>{1, 2, 3, 4}));  // left intact
  EXPECT_EQ(a.grad_fn(), nullptr);
  {
    NoGradGuard no_grad;  // as optimizers do
    v *= 2;
  }
  EXPECT_EQ(F(a), (std::vector<float>{2, 4, 3, 4}));
  EXPECT_TRUE(a.is_leaf());
}

EMBER_ON_DEVICES(AutogradNodes, "cpu", "cuda:0");

}  // namespace
