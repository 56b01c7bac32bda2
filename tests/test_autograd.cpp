// Autograd: the Tensor-side API, the engine, hooks, custom Functions and the errors, on cpu
// and on a cuda device (the same suite). Expected values are hand-computed or, where
// noted, taken from PyTorch 1.13.
#include <atomic>
#include <cmath>
#include <thread>

#include "test_support.h"

using namespace ember;
using ember::testing::error_of;

namespace {

class Autograd : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, bool grad = false, DType dtype = kFloat32) {
    return tensor(d, TensorOptions(dtype).device(dev_).requires_grad(grad));
  }
  static std::vector<float> F(const Tensor& t) { return t.to_vector<float>(); }
};

TEST_P(Autograd, LeafFlagsAndNodeNames) {
  auto x = T({1, 2, 3}, true);
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(x.grad_fn(), nullptr);
  auto w = T({4, 5, 6});
  EXPECT_FALSE(w.requires_grad());
  EXPECT_FALSE(zeros_like(x).requires_grad());  // options() does not carry requires_grad
  auto y = x * w;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  // Names as PyTorch 1.13 prints them.
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  EXPECT_EQ((x + w).grad_fn()->name(), "AddBackward0");
  EXPECT_EQ((x + 1).grad_fn()->name(), "AddBackward1");
  EXPECT_EQ((x * 2).grad_fn()->name(), "MulBackward1");
  EXPECT_EQ((2 - x).grad_fn()->name(), "RsubBackward1");
  EXPECT_EQ(x.to(kFloat64).grad_fn()->name(), "ToCopyBackward0");
  EXPECT_EQ(x.sum().grad_fn()->name(), "SumBackward0");
  EXPECT_EQ(x.sum(0).grad_fn()->name(), "SumBackward1");
  EXPECT_EQ(x.mean().grad_fn()->name(), "MeanBackward0");
  EXPECT_EQ(x.max().grad_fn()->name(), "MaxBackward1");
  EXPECT_EQ(x.view({3, 1}).grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(x.unsqueeze(0).t().grad_fn()->name(), "TBackward0");
  EXPECT_EQ(x.unsqueeze(0).transpose(0, 1).grad_fn()->name(), "TransposeBackward0");
  EXPECT_EQ(x.matmul(x).grad_fn()->name(), "DotBackward0");
  EXPECT_EQ(x.view({1, 3}).matmul(x.view({3, 1})).grad_fn()->name(), "MmBackward0");
  EXPECT_EQ(x.clone().grad_fn()->name(), "CloneBackward0");
  EXPECT_EQ(x[1].grad_fn()->name(), "SelectBackward0");
  EXPECT_EQ(x.slice(0, 1, 3).grad_fn()->name(), "SliceBackward0");
  EXPECT_EQ(x.expand({2, 3}).grad_fn()->name(), "ExpandBackward0");
  EXPECT_EQ(x.pow(2).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(x.pow(x).grad_fn()->name(), "PowBackward1");
  // Comparisons give bool results outside the graph.
  EXPECT_FALSE(x.gt(1).requires_grad());
}

TEST_P(Autograd, ElementwiseBackward) {
  auto x = T({1, 2, 3}, true);
  auto w = T({4, 5, 6});
  auto y = (x * w + x.exp()).sum();
  y.backward();
  auto g = F(x.grad());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[i], 4 + i + std::exp(1.0f + i), 1e-4);
  EXPECT_EQ(x.grad().device(), x.device());
  EXPECT_FALSE(w.grad().defined());
}

TEST_P(Autograd, BroadcastGradientsAreSummedToTheInputShape) {
  auto a = T({{1, 2, 3}, {4, 5, 6}}, true);
  auto b = T({10, 20, 30}, true);
  auto s = T(2.0, true);  // 0-dim
  ((a * b) * s).sum().backward();
  EXPECT_EQ(F(b.grad()), (std::vector<float>{10, 14, 18}));  // 2 * a.sum(0)
  EXPECT_EQ(F(a.grad()), (std::vector<float>{20, 40, 60, 20, 40, 60}));
  EXPECT_EQ(s.grad().dim(), 0);
  EXPECT_FLOAT_EQ(s.grad().item<float>(), 10 + 40 + 90 + 40 + 100 + 180);
}

TEST_P(Autograd, MatmulAndReductions) {
  // Values from PyTorch 1.13.
  auto q = T({{1, 2}, {3, 4}}, true), r = T({{5, 6}, {7, 8}}, true);
  q.matmul(r).sum().backward();
  EXPECT_EQ(F(q.grad()), (std::vector<float>{11, 15, 11, 15}));
  EXPECT_EQ(F(r.grad()), (std::vector<float>{4, 4, 6, 6}));
  auto m = T({{1, 5, 2}, {7, 3, 4}}, true);
  m.max(1).sum().backward();
  EXPECT_EQ(F(m.grad()), (std::vector<float>{0, 1, 0, 1, 0, 0}));
  auto n = T({{1, 5}, {7, 3}}, true);
  n.mean(0, true).sum().backward();
  EXPECT_EQ(F(n.grad()), (std::vector<float>{0.5, 0.5, 0.5, 0.5}));
}

TEST_P(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  auto x = T({1, 2}, true);
  auto y = (x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{4, 8}));
  x.mutable_grad() = Tensor();
  EXPECT_FALSE(x.grad().defined());
  (x * 3).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{3, 3}));
}

TEST_P(Autograd, ErrorsUsePyTorchWording) {
  auto x = T({1, 2, 3}, true);
  EXPECT_THROW_MSG(T({1, 2}, false, kInt64).requires_grad_(), ValueError,
                   "only Tensors of floating point and complex dtype can require gradients");
  EXPECT_THROW_MSG(tensor({1, 2}, TensorOptions(kInt64).requires_grad(true)), ValueError,
                   "only Tensors of floating point and complex dtype can require gradients");
  EXPECT_THROW_MSG((x * 2).backward(), Error, "grad can be implicitly created only for scalar outputs");
  EXPECT_THROW_MSG(T(1.0).backward(), Error, "element 0 of tensors does not require grad and does not have a grad_fn");
  EXPECT_THROW_MSG((x * 2).backward(T({1, 1})), ValueError,
                   "Mismatch in shape: grad_output[0] has a shape of [2] and output[0] has a shape of [3].");
  EXPECT_THROW_MSG((x * 2).backward(T({1, 1, 1}, false, kComplex64)), ValueError,
                   "Mismatch in dtype: grad_output[0] has a dtype of complex64 and output[0] has a dtype of float32.");
  EXPECT_THROW_MSG(x.add_(T({1, 1, 1})), Error,
                   "a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_EQ(F(x), (std::vector<float>{1, 2, 3}));  // left intact
  EXPECT_THROW_MSG(autograd::grad({(x * 2).sum()}, {x, T({1, 1}, true)}), Error,
                   "One of the differentiated Tensors appears to not have been used in the graph. Set "
                   "allow_unused=True if this is the desired behavior.");
  auto y = (x * x).sum();
  y.backward();
  EXPECT_THROW_MSG(y.backward(), Error, "Trying to backward through the graph a second time");
}

TEST_P(Autograd, InPlaceChangeOfASavedTensorIsCaught) {
  auto x = T({1, 2, 3}, true);
  auto z = x * 2;
  auto zz = z * z;  // saves z
  z.add_(T({1, 1, 1}));
  EXPECT_EQ(z.grad_fn()->name(), "AddBackward0");
  // PyTorch 1.13's message, up to its hint.
  EXPECT_THROW_MSG(zz.sum().backward(), Error,
                   "one of the variables needed for gradient computation has been modified by an inplace operation: "
                   "[" +
                       std::string(dev_.is_cuda() ? "torch.cuda." : "torch.") +
                       "FloatTensor [3]], which is output 0 of AddBackward0, is at version 1; expected version 0 "
                       "instead.");
  // In-place ops on non-leaves are differentiated: d/dx sum((2x + 1) * 3) = 6.
  auto w = x * 2;
  w.add_(T({1, 1, 1}));
  w.mul_(T({3, 3, 3}));
  w.sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{6, 6, 6}));
}

TEST_P(Autograd, NoGradAndDetach) {
  auto x = T({1, 2}, true);
  uint32_t version = x._version();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    auto y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    x.mul_(T({2, 2}));  // allowed without grad mode, as optimizers do
    std::atomic<bool> other{false};
    std::thread([&] { other = is_grad_enabled(); }).join();
    EXPECT_TRUE(other);  // thread-local
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_EQ(x._version(), version + 1);
  auto d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
  {
    AutoGradMode off(false);
    EXPECT_FALSE((x + 1).requires_grad());
  }
  set_grad_enabled(false);
  EXPECT_FALSE((x + 1).requires_grad());
  set_grad_enabled(true);
}

TEST_P(Autograd, GradAndDoubleBackward) {
  // From PyTorch 1.13: g1 = 3x^2, g2 = 6x.
  auto x = T({1, 2, 3}, true);
  auto g1 = autograd::grad({x.pow(3).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_EQ(F(g1), (std::vector<float>{3, 12, 27}));
  EXPECT_TRUE(g1.requires_grad());
  auto g2 = autograd::grad({g1.sum()}, {x})[0];
  EXPECT_EQ(F(g2), (std::vector<float>{6, 12, 18}));
  EXPECT_FALSE(x.grad().defined());  // grad() does not accumulate
  // Through mul, matmul and a reduction: d/dx sum(d/dx (x^T A x)) with A = [[1,2],[3,4]].
  auto v = T({1, 2}, true);
  auto A = T({{1, 2}, {3, 4}});
  auto gv = autograd::grad({v.matmul(A.matmul(v))}, {v}, {}, std::nullopt, true)[0];  // (A + A^T) v
  EXPECT_EQ(F(gv), (std::vector<float>{12, 21}));
  auto hv = autograd::grad({gv.sum()}, {v})[0];  // column sums of A + A^T
  EXPECT_EQ(F(hv), (std::vector<float>{7, 13}));
  auto unused = autograd::grad({(v * 2).sum()}, {v, T({1.0}, true)}, {}, std::nullopt, false, /*allow_unused=*/true);
  EXPECT_FALSE(unused[1].defined());
}

TEST_P(Autograd, HooksAndRetainGrad) {
  auto x = T({1, 2}, true);
  auto y = x * 3;
  y.retain_grad();
  auto h = y.register_hook([](const Tensor& g) { return g * 2; });
  int calls = 0;
  x.register_hook([&](const Tensor&) { ++calls; });  // void hook keeps the gradient
  std::vector<float> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& p) { seen = p.grad().to_vector<float>(); });
  (y * y).sum().backward({}, true);
  EXPECT_EQ(F(y.grad()), (std::vector<float>{12, 24}));  // retained after y's hooks
  EXPECT_EQ(F(x.grad()), (std::vector<float>{36, 72}));
  EXPECT_EQ(seen, (std::vector<float>{36, 72}));
  EXPECT_EQ(calls, 1);
  y.remove_hook(h);
  x.mutable_grad() = {};
  (y * y).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{18, 36}));
  y.remove_hook(h);  // removed already: a no-op, as PyTorch's handle.remove()
  EXPECT_THROW_MSG(T({1.0}).register_hook([](const Tensor& g) { return g; }), Error,
                   "cannot register a hook on a tensor that doesn't require gradient");
}

struct MulInStream : autograd::Function<MulInStream> {
  static Tensor forward(autograd::AutogradContext* ctx, Tensor x, double v) {
    ctx->saved_data["v"] = v;
    ctx->save_for_backward({x});
    return x * v;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grad_outputs) {
    double v = std::any_cast<double>(ctx->saved_data["v"]);
    EXPECT_EQ(ctx->get_saved_variables().size(), 1u);
    return {grad_outputs[0] * v, Tensor()};
  }
};

TEST_P(Autograd, CustomFunction) {
  auto x = T({1, 2}, true);
  auto y = MulInStream::apply(x, 3.0);
  EXPECT_EQ(F(y), (std::vector<float>{3, 6}));
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_NE(y.grad_fn()->name().find("MulInStream"), std::string::npos);
  (y * y).sum().backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{18, 36}));  // 2 * 3x * 3
  NoGradGuard no_grad;
  EXPECT_FALSE(MulInStream::apply(x, 2.0).requires_grad());
}

TEST_P(Autograd, QueueCallbackRunsAfterTheLastNode) {
  auto x = T({1, 2}, true);
  std::vector<std::string> order;
  auto y = x * 2;
  y.register_hook([&](const Tensor&) {
    order.push_back("hook");
    autograd::queue_callback([&] { order.push_back("callback"); });
  });
  x.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back("accumulated"); });
  y.sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"hook", "accumulated", "callback"}));
  EXPECT_THROW_MSG(autograd::queue_callback([] {}), Error,
                   "Final callbacks can only be installed during backward pass.");
}

TEST_P(Autograd, ViewsAndCopies) {
  auto x = T({{1, 2, 3}, {4, 5, 6}}, true);
  auto y = x.t().reshape({3, 2}).select(1, 0) * T({1, 10, 100});  // x[0, :] * [1, 10, 100]
  auto z = x.permute({1, 0}).slice(0, 1, 3).sum() + x.unsqueeze(0).squeeze(0).narrow(1, 0, 1).sum();
  (y.sum() + z + x.to(kFloat64).sum()).backward();
  // y: row 0 gets [1,10,100]; z: columns 1,2 get 1 each, column 0 gets 1; to: 1 each.
  EXPECT_EQ(F(x.grad()), (std::vector<float>{3, 12, 102, 2, 2, 2}));
  auto e = T({1, 2}, true);
  e.expand({3, 2}).sum().backward();
  EXPECT_EQ(F(e.grad()), (std::vector<float>{3, 3}));
  auto c = T({1, 2}, true);
  auto target = zeros({2}, dev_);
  target.copy_(c * 2);
  EXPECT_EQ(target.grad_fn()->name(), "CopyBackwards");
  (target * target).sum().backward();
  EXPECT_EQ(F(c.grad()), (std::vector<float>{8, 16}));  // d/dc (2c)^2
  auto idx = tensor({2, 0, 2}, TensorOptions(kInt64).device(dev_));
  auto s = T({1, 2, 3}, true);
  s.index_select(0, idx).sum().backward();
  EXPECT_EQ(F(s.grad()), (std::vector<float>{1, 0, 2}));
}

TEST_P(Autograd, ComplexGradientsFollowPyTorchsConvention) {
  // From PyTorch 1.13: grad of sum(|c * w|) is w.conj() * (c*w) / |c*w| ... per element.
  auto c = T({std::complex<double>(1, 2), std::complex<double>(3, -1)}, true, kComplex64);
  auto w = T({std::complex<double>(2, -1), std::complex<double>(1, 1)}, false, kComplex64);
  (c * w).abs().sum().backward();
  auto g = c.grad().to_vector<std::complex<float>>();
  EXPECT_NEAR(g[0].real(), 1.0, 1e-5);
  EXPECT_NEAR(g[0].imag(), 2.0, 1e-5);
  EXPECT_NEAR(g[1].real(), 1.3416, 1e-4);
  EXPECT_NEAR(g[1].imag(), -0.4472, 1e-4);
}

TEST_P(Autograd, SeveralRootsAndChosenInputs) {
  auto a = T({1, 2}, true), b = T({3, 4}, true);
  auto ya = (a * b).sum(), yb = (b * 2).sum();
  autograd::backward({ya, yb}, {}, std::nullopt, false, /*inputs=*/{b});
  EXPECT_FALSE(a.grad().defined());                    // only the chosen input accumulates
  EXPECT_EQ(F(b.grad()), (std::vector<float>{3, 4}));  // a + 2
}

TEST_P(Autograd, AFailureInTheMiddleLeavesARetainedGraphUsable) {
  auto x = T({1, 2}, true);
  auto y = x * 3;
  bool fail = true;
  y.register_hook([&](const Tensor& g) {
    if (fail) throw ValueError("hook failed");
    return g;
  });
  auto loss = (y * y).sum();
  EXPECT_THROW_MSG(loss.backward({}, /*retain_graph=*/true), ValueError, "hook failed");
  EXPECT_TRUE(is_grad_enabled());
  fail = false;
  loss.backward();
  EXPECT_EQ(F(x.grad()), (std::vector<float>{18, 36}));
  if (dev_.is_cuda()) cuda::synchronize();  // nothing was left waiting
}

EMBER_ON_DEVICES(Autograd, "cpu", "cuda:0");

TEST(AutogradThreads, ConcurrentBackwardPassesOnSharedLeaves) {
  auto w = tensor({1.0f, 2.0f}, TensorOptions().requires_grad(true));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) (w * w).sum().backward();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{200, 400}));
}

}  // namespace
