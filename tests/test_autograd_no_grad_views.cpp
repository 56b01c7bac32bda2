// Views made in no_grad mode (PyTorch's CreationMeta::NO_GRAD_MODE) and views of the
// outputs of multi-output ops: what requires_grad, is_leaf and grad_fn say of them, and
// which in-place changes are refused (before anything is written), on cpu and on a cuda
// device. Expected values and messages are taken from PyTorch 1.13 (/usr/bin/python3,
// import torch); where 1.13 fails, PyTorch 2.x's handle_view_on_rebase text is used and
// the test says so.
#include "test_support.h"

using namespace ember;

namespace {

const char* const kNoGradRest =
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
    "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or "
    "both outside (if you want the inplace to be tracked).";
const char* const kMultiOutputRest =
    " This view is the output of a function that returns multiple views. Such functions do not allow the output views "
    "to be modified inplace. You should replace the inplace operation by an out-of-place one.";

std::string direct_no_grad() {
  return std::string("A view was created in no_grad mode and is being modified inplace with grad mode enabled.") +
         kNoGradRest;
}
std::string indirect_no_grad() {
  return std::string(
             "A view was created in no_grad mode and its base or another view of its base has been modified inplace "
             "with grad mode enabled.") +
         kNoGradRest;
}

class AutogradNoGradViews : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, bool grad = false) {
    return tensor(d, TensorOptions(kFloat32).device(dev_).requires_grad(grad));
  }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
  template <class F>
  static std::string error_of(F&& f) {
    return ember::testing::error_of<Error>(std::forward<F>(f));
  }
};

TEST_P(AutogradNoGradViews, AViewMadeUnderNoGradRequiresGradButHasNoHistory) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  Tensor v;
  {
    NoGradGuard no_grad;
    v = a.slice(0, 0, 2);
  }
  EXPECT_TRUE(v.requires_grad());
  EXPECT_EQ(v.grad_fn(), nullptr);
  EXPECT_TRUE(v.is_leaf());
  EXPECT_EQ(v.data_ptr(), a.data_ptr());
  auto y = v * 2;
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward1");  // LibTorch's name for mul(Tensor, Scalar)
  y.sum().backward();
  EXPECT_FALSE(l.grad().defined());  // nothing flows to the base
  EXPECT_FALSE(v.grad().defined());
}

TEST_P(AutogradNoGradViews, InPlaceInGradModeIsRefusedBeforeTheWrite) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  Tensor v, w;
  {
    NoGradGuard no_grad;
    v = a.slice(0, 0, 2);
    w = l.slice(0, 0, 2);  // of a leaf: the no_grad error comes first
  }
  const uint32_t version = a._version();
  const auto fn = a.grad_fn();
  EXPECT_EQ(error_of([&] { v *= 2; }), direct_no_grad());
  EXPECT_EQ(error_of([&] { v.zero_(); }), direct_no_grad());
  EXPECT_EQ(error_of([&] { v.copy_(T({7, 8})); }), direct_no_grad());
  EXPECT_EQ(error_of([&] { w *= 2; }), direct_no_grad());
  EXPECT_EQ(F(a), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(F(l), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(a._version(), version);
  EXPECT_EQ(a.grad_fn(), fn);
  EXPECT_EQ(v.grad_fn(), nullptr);  // nothing changed: still no history
  EXPECT_TRUE(l.is_leaf());

  // A base that does not require grad, with another input that does: recorded, so refused.
  auto b = zeros({3}, dev_);
  Tensor vb;
  {
    NoGradGuard no_grad;
    vb = b.slice(0, 0, 2);
  }
  EXPECT_EQ(error_of([&] { vb.add_(T({1, 1}, true)); }), direct_no_grad());
  EXPECT_EQ(F(b), (std::vector<float>{0, 0, 0}));
}

TEST_P(AutogradNoGradViews, InPlaceUnderNoGradIsAllowedAndNotTracked) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  const auto fn = a.grad_fn();
  Tensor v, w;
  {
    NoGradGuard no_grad;
    v = a.slice(0, 0, 2);
    w = l.slice(0, 2, 3);
    v *= 2;
    w += 1;  // as an optimizer changes a parameter through a view
    EXPECT_EQ(F(v * 2), (std::vector<float>{4, 8}));
  }
  EXPECT_EQ(F(a), (std::vector<float>{2, 4, 3}));
  EXPECT_EQ(F(l), (std::vector<float>{1, 2, 4}));
  EXPECT_EQ(a.grad_fn(), fn);  // no CopySlices
  EXPECT_TRUE(l.is_leaf());
  // The view's storage version moved: its history can no longer be made (PyTorch 1.13 and 2.x).
  EXPECT_EQ(error_of([&] { (void)v.grad_fn(); }), indirect_no_grad());
  EXPECT_EQ(error_of([&] { (void)v.is_leaf(); }), indirect_no_grad());
  a.sum().backward();
  EXPECT_EQ(F(l.grad()), (std::vector<float>{1, 1, 1}));
}

TEST_P(AutogradNoGradViews, AChangeOfTheBaseMakesTheViewUnusableInGradMode) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  Tensor s;
  {
    NoGradGuard no_grad;
    s = a.slice(0, 0, 2);
  }
  a *= 3;  // recorded on the base: fine
  EXPECT_EQ(a.grad_fn()->name(), "MulBackward1");
  EXPECT_EQ(error_of([&] { (void)s.grad_fn(); }), indirect_no_grad());
  EXPECT_EQ(error_of([&] { (void)(s * 2); }), indirect_no_grad());
  // As the other input of an in-place op, refused before the write.
  auto z = zeros({2}, dev_);
  const uint32_t version = z._version();
  EXPECT_EQ(error_of([&] { z.add_(s); }), indirect_no_grad());
  EXPECT_EQ(F(z), (std::vector<float>{0, 0}));
  EXPECT_EQ(z._version(), version);
  {
    NoGradGuard no_grad;  // nothing to record: fine
    EXPECT_EQ(F(s * 2), (std::vector<float>{6, 12}));
  }
}

TEST_P(AutogradNoGradViews, AViewOfABaseThatDoesNotRequireGradIsUnaffected) {
  auto b = zeros({3}, dev_);
  Tensor vb;
  {
    NoGradGuard no_grad;
    vb = b.slice(0, 0, 2);
  }
  EXPECT_FALSE(vb.requires_grad());
  vb += 1;
  b *= 3;
  EXPECT_EQ(vb.grad_fn(), nullptr);
  EXPECT_TRUE(vb.is_leaf());
  EXPECT_FALSE(vb.requires_grad());
  EXPECT_EQ(F(b), (std::vector<float>{3, 3, 0}));
}

TEST_P(AutogradNoGradViews, ViewsOfViewsKeepHowTheFirstWasMade) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  Tensor v4, v7;
  auto v6 = a.slice(0, 0, 2);  // grad mode
  {
    NoGradGuard no_grad;
    v4 = a.slice(0, 0, 2);
    v7 = v6.slice(0, 0, 1);
  }
  // Made in grad mode from a no_grad view: it has a node, but is still a no_grad view.
  // PyTorch 1.13 hits an internal assert here; the text is 2.x's.
  auto v5 = v4.view({2});
  ASSERT_NE(v5.grad_fn(), nullptr);
  EXPECT_EQ(v5.grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(error_of([&] { v5 *= 2; }),
            std::string("Output 0 of ViewBackward0 is a view of a view which was created in no_grad mode and is being "
                        "modified inplace with grad mode enabled.") +
                kNoGradRest);
  (v5 * 2).sum().backward();
  EXPECT_FALSE(l.grad().defined());
  // Made under no_grad from a view made in grad mode.
  EXPECT_TRUE(v7.requires_grad());
  EXPECT_EQ(v7.grad_fn(), nullptr);
  EXPECT_EQ(error_of([&] { v7 *= 2; }), direct_no_grad());
  EXPECT_EQ(F(a), (std::vector<float>{1, 2, 3}));
}

TEST_P(AutogradNoGradViews, MultiOutputViewsAndTheirViews) {
  auto x = T({1, 2, 3, 4, 5, 6}, true);
  auto y = x * 1;
  auto p = y.split(2)[0];
  auto q = p.view({-1});
  EXPECT_EQ(error_of([&] { q *= 2; }),
            std::string("Output 0 of ViewBackward0 is a view and is being modified inplace.") + kMultiOutputRest);
  Tensor r;
  {
    NoGradGuard no_grad;
    r = y.split(2)[1];
  }
  EXPECT_EQ(error_of([&] { r *= 2; }), direct_no_grad());
  y *= 2;
  EXPECT_EQ(error_of([&] { (void)p.grad_fn(); }),
            std::string("Output 0 of SplitBackward0 is a view and its base or another view of its base has been "
                        "modified inplace.") +
                kMultiOutputRest);
  EXPECT_EQ(F(y), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST_P(AutogradNoGradViews, ViewsMadeInGradModeStillRebaseTheirBase) {
  auto l = T({1, 2, 3}, true);
  auto a = l * 1;
  auto v = a.slice(0, 0, 2);
  v *= 2;
  EXPECT_EQ(a.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward0");
  a.sum().backward();
  EXPECT_EQ(F(l.grad()), (std::vector<float>{2, 2, 1}));

  // t() is made inside the op under NoGradGuard, but its output is a view made in grad mode.
  auto l2 = T({{1, 2}, {3, 4}}, true);
  auto a2 = l2 * 1;
  auto t = a2.t();
  t.mul_(T({{1, 2}, {3, 4}}));
  EXPECT_EQ(a2.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(t.grad_fn()->name(), "AsStridedBackward0");
  a2.sum().backward();
  EXPECT_EQ(F(l2.grad()), (std::vector<float>{1, 3, 2, 4}));
}

EMBER_ON_DEVICES(AutogradNoGradViews, "cpu", "cuda:0");

}  // namespace
