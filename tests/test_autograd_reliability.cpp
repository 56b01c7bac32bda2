// Autograd under hostile but realistic use (issue 27): deep graphs freed without
// recursion, in-place ops whose saved input aliases what they write, losses over ignored
// targets only, overlapping as_strided windows, clamp with crossed bounds, gradients of
// the wrong size or dtype, non-leaf parameters and idempotent hook removal. Expected
// values and messages come from PyTorch 1.13 (/usr/bin/python3), noted where 2.x differs.
#include <gmock/gmock.h>

#include <cmath>

#include "test_support.h"

using namespace ember;
using ember::testing::error_of;

namespace {

class AutogradReliability : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, bool grad = false, DType dtype = kFloat32) {
    return tensor(d, TensorOptions(dtype).device(dev_).requires_grad(grad));
  }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
};

// ---- item 1: long graphs are freed without recursion ---------------------------------

// Chains of 1,000,000 nodes. Under the sanitizers, where each node costs several times as
// much time, 200,000: a recursive free of that many nodes, at a hundred bytes of stack or
// more each, would still overflow a thread's 8 MiB stack.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kChainNodes = 200'000;
#else
constexpr int kChainNodes = 1'000'000;
#endif

// A long chain: built, backpropagated, then freed when `loss` goes.
TEST(AutogradDeepGraph, LongNodeChainBackwardAndFree) {
  auto w = tensor({2.0f}, TensorOptions().requires_grad(true));
  auto c = tensor({1.0f});
  Tensor loss = zeros({1});
  constexpr int kSteps = kChainNodes / 2;  // two nodes per step: MulBackward0 and AddBackward0
  for (int i = 0; i < kSteps; ++i) loss = loss + w * c;
  loss.sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{static_cast<float>(kSteps)}));
  EXPECT_EQ(loss.to_vector<float>(), (std::vector<float>{2.0f * kSteps}));
  loss = Tensor();  // frees the chain
}

// Freed without a backward pass: each MulBackward0 saves the previous (non-leaf) result,
// whose grad_fn is the next node: the saved tensor holds the other reference to it.
TEST(AutogradDeepGraph, LongNodeChainFreedWithoutBackward) {
  auto x = tensor({1.0f}, TensorOptions().requires_grad(true));
  auto w = tensor({1.0f});
  Tensor y = x;
  for (int i = 0; i < kChainNodes; ++i) y = y * w;
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  y = Tensor();
}

// In-place ops on views: each makes a CopySlices node whose op node shares its edges.
TEST(AutogradDeepGraph, LongCopySlicesChainIsFreed) {
  auto x = tensor({0.0f, 0.0f}, TensorOptions().requires_grad(true));
  Tensor base = x * 1;
  for (int i = 0; i < 200'000; ++i) base.select(0, 0) += 1;
  EXPECT_EQ(base.grad_fn()->name(), "CopySlices");
  base = Tensor();
}

TEST(AutogradDeepGraph, CopySlicesRefusesASecondBackward) {
  auto x = tensor({1.0f, 2.0f}, TensorOptions().requires_grad(true));
  Tensor base = x * 1;
  base.select(0, 0) += 1;
  Tensor loss = base.sum();
  loss.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1}));
  // PyTorch: the same error for CopySlices as for any freed saved tensor.
  EXPECT_THAT(error_of<Error>([&] { loss.backward(); }),
              ::testing::HasSubstr("Trying to backward through the graph a second time"));
}

// ---- item 3: an in-place op's own saved input that aliases what it writes --------------

TEST_P(AutogradReliability, InplaceOpWhoseSavedInputAliasesSelfIsCaught) {
  // PyTorch 1.13 raises at backward for each of these.
  {
    auto a = T({1, 2, 3}, true);
    Tensor x = a * 1;
    x.mul_(x);
    EXPECT_EQ(error_of<Error>([&] { x.sum().backward(); }),
              "one of the variables needed for gradient computation has been modified by an inplace operation: [" +
                  std::string(dev_.is_cuda() ? "torch.cuda.FloatTensor" : "torch.FloatTensor") +
                  " [3]], which is output 0 of MulBackward0, is at version 1; expected version 0 instead.");
  }
  {
    auto a = T({{1, 2}, {3, 4}}, true);
    Tensor x = a * 1;
    x.div_(x.slice(1, 0, 1).detach());
    EXPECT_THAT(error_of<Error>([&] { x.sum().backward(); }),
                ::testing::HasSubstr("[2, 1]] is at version 1; expected version 0 instead."));
  }
  {
    auto a = T({1, 2, 3}, true);
    Tensor x = a * 1;
    x.mul_(x.detach());
    EXPECT_THAT(error_of<Error>([&] { x.sum().backward(); }),
                ::testing::HasSubstr("[3]] is at version 1; expected version 0 instead."));
  }
  {  // on a view: the op's node inside CopySlices saves `other` as the op read it
    auto a = T({1, 2, 3}, true);
    Tensor x = a * 1;
    Tensor v = x.slice(0, 0, 2);
    v.mul_(v);
    EXPECT_THAT(
        error_of<Error>([&] { x.sum().backward(); }),
        ::testing::HasSubstr("[2]], which is output 0 of AsStridedBackward0, is at version 1; expected version 0 "
                             "instead."));
  }
}

TEST_P(AutogradReliability, InplaceOpsThatSaveNothingOrAnotherTensorStillWork) {
  auto a = T({1, 2, 3}, true);
  Tensor x = a * 1;
  x.add_(x);  // AddBackward0 saves nothing: PyTorch gives 2
  x.sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{2, 2, 2}));
  auto b = T({1, 2, 3}, true);
  Tensor y = b * 1;
  y.mul_(b);  // other is not written: PyTorch gives 2b
  y.sum().backward();
  EXPECT_EQ(F(b.grad()), (std::vector<float>{2, 4, 6}));
}

// ---- item 4: mean losses over ignored targets only --------------------------------------

TEST_P(AutogradReliability, MeanLossOverIgnoredTargetsOnlyHasZeroGradient) {
  namespace nnf = ember::nn::functional;
  const std::vector<float> zero(6, 0.0f);
  auto all_ignored = tensor({int64_t{-100}, int64_t{-100}}, TensorOptions(kInt64).device(dev_));
  for (double smoothing : {0.0, 0.1}) {
    auto x = T({{1, 2, 3}, {0.5, -1, 2}}, true);
    Tensor loss = nnf::cross_entropy(x, all_ignored, "mean", -100, smoothing);
    EXPECT_TRUE(std::isnan(loss.item<float>()));  // PyTorch: nan
    loss.backward();
    EXPECT_EQ(F(x.grad()), zero) << "label_smoothing " << smoothing;  // PyTorch: exactly 0
  }
  {
    auto x = T({{1, 2, 3}, {0.5, -1, 2}}, true);
    Tensor loss = nnf::nll_loss(x, all_ignored);
    EXPECT_TRUE(std::isnan(loss.item<float>()));
    loss.backward();
    EXPECT_EQ(F(x.grad()), zero);
  }
  {  // ignore_index a valid class
    auto x = T({{1, 2, 3}, {0.5, -1, 2}}, true);
    auto ones_target = tensor({int64_t{1}, int64_t{1}}, TensorOptions(kInt64).device(dev_));
    nnf::nll_loss(x, ones_target, "mean", 1).backward();
    EXPECT_EQ(F(x.grad()), zero);
  }
  {  // sum over ignored targets only: loss 0, gradient 0
    auto x = T({{1, 2, 3}, {0.5, -1, 2}}, true);
    Tensor loss = nnf::cross_entropy(x, all_ignored, "sum", -100, 0.1);
    EXPECT_EQ(loss.item<float>(), 0.0f);
    loss.backward();
    EXPECT_EQ(F(x.grad()), zero);
  }
}

TEST_P(AutogradReliability, PartlyIgnoredTargetsKeepPyTorchGradients) {
  namespace nnf = ember::nn::functional;
  auto target = tensor({int64_t{2}, int64_t{-100}}, TensorOptions(kInt64).device(dev_));
  auto x = T({{1, 2, 3}, {0.5, -1, 2}}, true);
  Tensor loss = nnf::cross_entropy(x, target, "mean", -100, 0.1);
  EXPECT_NEAR(loss.item<float>(), 0.50760591f, 1e-6);
  loss.backward();
  std::vector<float> expected{0.05669725f, 0.21139516f, -0.26809233f, 0, 0, 0};
  std::vector<float> got = F(x.grad());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
  auto y = T({{1, 2, 3}, {0.5, -1, 2}}, true);
  Tensor nll = nnf::nll_loss(y, target);
  EXPECT_EQ(nll.item<float>(), -3.0f);
  nll.backward();
  EXPECT_EQ(F(y.grad()), (std::vector<float>{0, 0, -1, 0, 0, 0}));
}

// ---- item 5: as_strided with overlapping windows -----------------------------------------

TEST_P(AutogradReliability, AsStridedOverlappingWindowsAccumulate) {
  auto a = T({0, 1, 2, 3, 4}, true);
  a.as_strided({4, 2}, {1, 1}, 0).sum().backward();
  EXPECT_EQ(F(a.grad()), (std::vector<float>{1, 2, 2, 2, 1}));  // PyTorch 1.13

  auto b = T({0, 1, 2, 3, 4}, true);
  auto weights = arange(8, TensorOptions().device(dev_)).view({4, 2});
  (b.as_strided({4, 2}, {1, 1}, 0) * weights).sum().backward();
  EXPECT_EQ(F(b.grad()), (std::vector<float>{0, 3, 7, 11, 7}));
}

TEST_P(AutogradReliability, AsStridedOfAViewWithAnOffset) {
  auto b = T({0, 1, 2, 3, 4, 5, 6, 7}, true);
  Tensor v = b.slice(0, 2, 8);  // storage offset 2
  (v.as_strided({3, 3}, {1, 1}, 3) * arange(9, TensorOptions().device(dev_)).view({3, 3})).sum().backward();
  EXPECT_EQ(F(b.grad()), (std::vector<float>{0, 0, 0, 0, 4, 12, 12, 8}));  // PyTorch 1.13

  auto c = T({0, 1, 2, 3, 4, 5, 6, 7}, true);
  Tensor u = c.slice(0, 1, 8);  // a stride-0 dim in the output, windows overlapping
  (u.as_strided({2, 2, 2}, {2, 1, 0}, 2) * arange(8, TensorOptions().device(dev_)).view({2, 2, 2})).sum().backward();
  EXPECT_EQ(F(c.grad()), (std::vector<float>{0, 0, 1, 5, 9, 13, 0, 0}));
}

TEST_P(AutogradReliability, AsStridedOfAnOverlappingInputSharesTheGradient) {
  // The input reaches each element several times (expand): PyTorch divides by the count.
  auto c = T({1, 2}, true);
  (c.expand({3, 2}).as_strided({2, 2}, {0, 1}, 0) * T({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_EQ(F(c.grad()), (std::vector<float>{4, 6}));
  auto d = T({1, 2, 3}, true);
  (d.expand({2, 3}).as_strided({2, 2}, {1, 1}, 0) * T({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_EQ(F(d.grad()), (std::vector<float>{1, 5, 4}));
}

// ---- item 6: clamp with tensor bounds, min > max ----------------------------------------

TEST_P(AutogradReliability, ClampWithCrossedBoundsGivesMaxTheGradient) {
  auto x = T({0, 1, 2, 3, 4}, true);
  auto lo = T({3, 3, 1, 2, 2}, true);
  auto hi = T({1, 1, 3, 2, 2}, true);
  Tensor y = clamp(x, lo, hi);
  EXPECT_EQ(F(y), (std::vector<float>{1, 1, 2, 2, 2}));
  (y * T({1, 2, 3, 4, 5})).sum().backward();
  // PyTorch 1.13 (clamp_backward_min_max).
  EXPECT_EQ(F(x.grad()), (std::vector<float>{0, 0, 3, 0, 0}));
  EXPECT_EQ(F(lo.grad()), (std::vector<float>{0, 0, 0, 0, 0}));
  EXPECT_EQ(F(hi.grad()), (std::vector<float>{1, 2, 0, 4, 5}));

  auto x2 = T({0, 1, 2, 3, 4}, true);
  auto lo2 = T({3}, true);
  (clamp(x2, lo2, Tensor()) * T({1, 2, 3, 4, 5})).sum().backward();
  EXPECT_EQ(F(x2.grad()), (std::vector<float>{0, 0, 0, 4, 5}));
  EXPECT_EQ(F(lo2.grad()), (std::vector<float>{6}));
}

// ---- item 7: gradients of the wrong size or dtype -------------------------------------------

TEST_P(AutogradReliability, HookChangingTheSizeOrTypeOfAGradientIsRefused) {
  auto x = T({1, 2, 3}, true);
  unsigned h = x.register_hook([&](const Tensor&) { return ones({2, 3}, TensorOptions().device(dev_)); });
  EXPECT_THAT(error_of<Error>([&] { (x * 2).sum().backward(); }),
              ::testing::HasSubstr("has changed the size of value (was [3] got [2, 3])"));
  EXPECT_FALSE(x.grad().defined());
  x.remove_hook(h);

  // PyTorch: "hook 'hook2' has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)"
  const std::string f32 = dev_.is_cuda() ? "torch.cuda.FloatTensor" : "torch.FloatTensor";
  const std::string f64 = dev_.is_cuda() ? "torch.cuda.DoubleTensor" : "torch.DoubleTensor";
  x.register_hook([](const Tensor& g) { return g.to(kFloat64); });
  EXPECT_THAT(error_of<Error>([&] { (x * 2).sum().backward(); }),
              ::testing::HasSubstr("has changed the type of value (was " + f32 + " got " + f64 + ")"));

  auto a = T({1, 2, 3}, true);
  Tensor y = a * 2;  // a hook on an intermediate
  y.register_hook([](const Tensor& g) { return g.to(kFloat64); });
  EXPECT_THAT(error_of<Error>([&] { (y * 2).sum().backward(); }),
              ::testing::HasSubstr("has changed the type of value (was " + f32 + " got " + f64 + ")"));
  EXPECT_FALSE(a.grad().defined());
}

TEST_P(AutogradReliability, AssignedGradOfTheWrongSizeOrTypeIsRefused) {
  auto x = T({1, 2, 3}, true);
  x.mutable_grad() = ones({2, 3}, TensorOptions().device(dev_));
  EXPECT_EQ(error_of<Error>([&] { (x * 2).sum().backward(); }), "assigned grad has data of a different size");
  auto d = T({1, 2, 3}, true, kFloat64);
  d.mutable_grad() = ones({3}, TensorOptions().device(dev_));  // float32 on a float64 leaf
  EXPECT_EQ(error_of<TypeError>([&] { (d * 2).sum().backward(); }), "assigned grad has data of a different type");
  EXPECT_EQ(d.grad().dtype(), kFloat32);  // left as it was
}

TEST_P(AutogradReliability, BackwardCastsAGradientOfAnotherRealDtype) {
  auto x = T({1, 2, 3}, true, kFloat64);
  (x * 2).backward(T({1, 1, 1}));  // float32 gradient for a float64 output: cast (PyTorch)
  EXPECT_EQ(x.grad().dtype(), kFloat64);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
  // A complex gradient of a real output is refused, with PyTorch's message.
  EXPECT_EQ(error_of<ValueError>([&] {
              (x * 2).backward(T({1, 1, 1}, false, kComplex64));
            }),
            "For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch in dtype: "
            "grad_output[0] has a dtype of complex64 and output[0] has a dtype of float64.");
}

// ---- item 8: parameters that can never train ---------------------------------------------

TEST(AutogradParameters, NonLeafParametersAreRefused) {
  auto a = ones({3}, TensorOptions().requires_grad(true));
  Tensor computed = a * 2;
  nn::Module module;
  // PyTorch's Module.register_parameter.
  EXPECT_EQ(error_of<ValueError>([&] { module.register_parameter("scale", computed); }),
            "Cannot assign non-leaf Tensor to parameter 'scale'. Model parameters must be created explicitly. To "
            "express 'scale' as a function of another Tensor, compute the value in the forward() method.");
  EXPECT_TRUE(module.parameters().empty());
  module.register_parameter("scale", computed.detach());  // a leaf is fine

  EXPECT_EQ(error_of<ValueError>([&] { optim::SGD({computed}, optim::SGDOptions(0.1)); }),
            "can't optimize a non-leaf Tensor");
  EXPECT_EQ(error_of<ValueError>([&] {
              optim::Adam({a, computed}, optim::AdamOptions(0.1));
            }),
            "can't optimize a non-leaf Tensor");
  // PyTorch 2.x: a non-leaf that retains its grad may be optimized.
  computed.retain_grad();
  optim::SGD sgd({computed}, optim::SGDOptions(0.1));
  EXPECT_EQ(sgd.params(0).size(), 1u);
}

// ---- item 16: removing a hook twice ---------------------------------------------------------

TEST_P(AutogradReliability, RemovingAHookTwiceIsANoOp) {
  auto x = T({1, 2}, true);
  Tensor y = x * 3;
  unsigned on_leaf = x.register_hook([](const Tensor& g) { return g * 2; });
  unsigned on_y = y.register_hook([](const Tensor& g) { return g * 5; });
  x.remove_hook(on_leaf);
  x.remove_hook(on_leaf);
  y.remove_hook(on_y);
  y.remove_hook(on_y);
  y.sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{3, 3}));
  T({1.0}).remove_hook(on_leaf);  // a tensor with no hooks at all
}

EMBER_ON_DEVICES(AutogradReliability, "cpu", "cuda:0");

}  // namespace
