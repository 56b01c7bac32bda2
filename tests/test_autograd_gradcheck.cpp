// Every differentiable op against finite differences (gradcheck, float64; complex128 for
// the ops that take complex input), on cpu and on a cuda device; then each op's
// gradients on the cuda device against the cpu's. One line per op.
#include <cmath>

#include "kernels/op_list.h"
#include "test_support.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

using Fn = autograd::GradcheckFn;
using Ts = std::vector<Tensor>;

class Gradcheck : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    manual_seed(7);
  }
  TensorOptions opts(DType dtype = kFloat64) const { return TensorOptions(dtype).device(dev_).requires_grad(true); }
  /// Standard normal values.
  Tensor R(const IntList& shape, DType dtype = kFloat64) { return randn(shape, opts(dtype)); }
  /// Values in [0.5, 1.5): away from the poles of log, sqrt, division and pow.
  Tensor P(const IntList& shape) {
    return (rand(shape, TensorOptions(kFloat64).device(dev_)) + 0.5).requires_grad_(true);
  }
  /// Distinct values (a permutation of a grid), for max/min and pooling.
  Tensor D(const IntList& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 37) % n) * 0.1 - 1.0;
    return tensor(TensorData(v), TensorOptions(kFloat64).device(dev_)).reshape(shape).requires_grad_(true);
  }
  Tensor I(const TensorData& d) { return tensor(d, TensorOptions(kInt64).device(dev_)); }
  Tensor B(const TensorData& d) { return tensor(d, TensorOptions(kBool).device(dev_)); }

  /// gradcheck with the failure message as the test's.
  void check(const char* op, const Fn& fn, const Ts& inputs) {
    try {
      autograd::gradcheck(fn, inputs, 1e-6, 1e-5, 1e-3);
    } catch (const Error& e) {
      ADD_FAILURE() << op << " on " << dev_ << ": " << e.what();
    }
  }
};

Fn one(Tensor (*f)(const Tensor&)) {
  return [f](const Ts& x) { return Ts{f(x[0])}; };
}
template <typename L>
Fn fn(L l) {
  return [l](const Ts& x) { return Ts{l(x)}; };
}

TEST_P(Gradcheck, Elementwise) {
  check("add", fn([](const Ts& x) { return add(x[0], x[1], 2); }), {R({2, 3}), R({3})});
  check("sub", fn([](const Ts& x) { return sub(x[0], x[1], 0.5); }), {R({2, 3}), R({2, 1})});
  check("mul", fn([](const Ts& x) { return x[0] * x[1]; }), {R({2, 3}), R({1, 3})});
  check("div", fn([](const Ts& x) { return x[0] / x[1]; }), {R({2, 3}), P({2, 3})});
  check("pow", fn([](const Ts& x) { return pow(x[0], x[1]); }), {P({4}), R({4})});
  check("pow scalar", fn([](const Ts& x) { return pow(x[0], 2.5); }), {P({4})});
  check("add scalar", fn([](const Ts& x) { return x[0] + 2; }), {R({3})});
  check("mul scalar", fn([](const Ts& x) { return x[0] * 3; }), {R({3})});
  check("rsub", fn([](const Ts& x) { return 2 - x[0]; }), {R({3})});
  check("rdiv", fn([](const Ts& x) { return 2 / x[0]; }), {P({3})});
  check("div scalar", fn([](const Ts& x) { return x[0] / 4; }), {R({3})});
  check("neg", one(neg), {R({3})});
  check("abs", one(ember::abs), {(P({3}) - 1.0).detach().requires_grad_()});
  check("exp", one(ember::exp), {R({3})});
  check("log", one(ember::log), {P({3})});
  check("sqrt", one(ember::sqrt), {P({3})});
  check("relu", one(ember::relu), {R({6})});
  check("sigmoid", one(sigmoid), {R({3})});
  check("tanh", one(ember::tanh), {R({3})});
  check("in-place", fn([](const Ts& x) {
          Tensor y = x[0] * 1;
          y.mul_(x[1]);
          y += 1;
          y.sub_(x[1], 2);
          return y;
        }),
        {R({3}), R({3})});
}

// Every row of the floating unary and binary op lists (Note [Declaring an op] in
// kernels/unary_ops.h, Note [Declaring a binary op] in kernels/op_list.h): a new row is checked
// here without an edit. Inputs in [0.5, 1.5) keep away from the poles of log, sqrt and rsqrt.
TEST_P(Gradcheck, EveryFloatFamilyRow) {
#define EMBER_CHECK_UNARY(Kind, name, ...) check(#name, fn([](const Ts& x) { return ember::name(x[0]); }), {P({2, 3})});
  EMBER_FLOAT_UNARY_OPS(EMBER_CHECK_UNARY)
#undef EMBER_CHECK_UNARY
#define EMBER_CHECK_BINARY(Kind, name, ...) \
  check(#name, fn([](const Ts& x) { return ember::name(x[0], x[1]); }), {P({2, 3}), R({3})});
  EMBER_FLOAT_BINARY_OPS(EMBER_CHECK_BINARY)
#undef EMBER_CHECK_BINARY
}

TEST_P(Gradcheck, ComplexElementwise) {
  check("mul", fn([](const Ts& x) { return x[0] * x[1]; }), {R({3}, kComplex128), R({3}, kComplex128)});
  check("div", fn([](const Ts& x) { return x[0] / (x[1] + 3.0); }), {R({3}, kComplex128), R({3}, kComplex128)});
  check("exp", one(ember::exp), {R({3}, kComplex128)});
  check("abs", one(ember::abs), {R({3}, kComplex128)});
  check("sum", one(ember::sum), {R({2, 2}, kComplex128)});
  check("matmul", fn([](const Ts& x) { return x[0].matmul(x[1]); }), {R({2, 3}, kComplex128), R({3, 2}, kComplex128)});
  check("real to complex", fn([](const Ts& x) { return x[0].to(kComplex128) * x[1]; }), {R({3}), R({3}, kComplex128)});
}

TEST_P(Gradcheck, Reductions) {
  check("sum", one(ember::sum), {R({2, 3})});
  check("sum dim", fn([](const Ts& x) { return x[0].sum(1, true); }), {R({2, 3})});
  check("mean", one(ember::mean), {R({2, 3})});
  check("mean dim", fn([](const Ts& x) { return x[0].mean(0); }), {R({2, 3})});
  check("max", one(ember::max), {D({2, 3})});
  check("max dim", fn([](const Ts& x) { return x[0].max(1); }), {D({2, 3})});
  check("min", one(ember::min), {D({2, 3})});
  check("min dim", fn([](const Ts& x) { return x[0].min(0, true); }), {D({2, 3})});
}

TEST_P(Gradcheck, LinearAlgebra) {
  auto mm = fn([](const Ts& x) { return x[0].matmul(x[1]); });
  check("mm", mm, {R({2, 3}), R({3, 2})});
  check("dot", mm, {R({3}), R({3})});
  check("mv", mm, {R({2, 3}), R({3})});
  check("vm", mm, {R({3}), R({3, 2})});
  check("batched broadcast", mm, {R({2, 2, 3}), R({3, 2})});
  check("bmm", fn([](const Ts& x) { return bmm(x[0], x[1]); }), {R({2, 2, 3}), R({2, 3, 2})});
  check("addmm", fn([](const Ts& x) { return addmm(x[0], x[1], x[2]); }), {R({2}), R({3, 2}), R({2, 2})});
  check("addmm scaled", fn([](const Ts& x) { return addmm(x[0], x[1], x[2], 0.5, -2.0); }),
        {R({3, 1}), R({3, 2}), R({2, 2})});
  check("mm of transposed operands", fn([](const Ts& x) { return x[0].t().matmul(x[1].t()); }), {R({3, 2}), R({4, 3})});
  Tensor idx = I({2, 0, 2});
  check("index_select", fn([idx](const Ts& x) { return x[0].index_select(1, idx); }), {R({2, 3})});
}

TEST_P(Gradcheck, ViewsAndCopies) {
  check("view", fn([](const Ts& x) { return x[0].view({3, 2}); }), {R({2, 3})});
  check("reshape copy", fn([](const Ts& x) { return x[0].t().reshape({6}); }), {R({2, 3})});
  check("t", fn([](const Ts& x) { return x[0].t(); }), {R({2, 3})});
  check("transpose", fn([](const Ts& x) { return x[0].transpose(0, 2); }), {R({2, 1, 3})});
  check("permute", fn([](const Ts& x) { return x[0].permute({2, 0, 1}); }), {R({2, 1, 3})});
  check("select", fn([](const Ts& x) { return x[0].select(1, -1); }), {R({2, 3})});
  check("slice", fn([](const Ts& x) { return x[0].slice(1, 0, 5, 2); }), {R({2, 5})});
  check("narrow", fn([](const Ts& x) { return x[0].narrow(0, 1, 2); }), {R({3, 2})});
  check("expand", fn([](const Ts& x) { return x[0].expand({2, 3, 2}); }), {R({3, 1})});
  check("squeeze", fn([](const Ts& x) { return x[0].squeeze(1); }), {R({3, 1})});
  check("unsqueeze", fn([](const Ts& x) { return x[0].unsqueeze(-1); }), {R({3})});
  check("flatten", fn([](const Ts& x) { return x[0].flatten(1, -1); }), {R({2, 2, 2})});
  check("as_strided", fn([](const Ts& x) { return x[0].as_strided({2, 2}, {1, 2}, 1); }), {R({6})});
  check("as_strided overlapping", fn([](const Ts& x) { return x[0].as_strided({3, 2}, {0, 1}, 0); }), {R({2})});
  check("contiguous", fn([](const Ts& x) { return x[0].t().contiguous(); }), {R({2, 3})});
  check("clone", fn([](const Ts& x) { return x[0].clone(); }), {R({3})});
  check("in-place on a view", fn([](const Ts& x) {
          Tensor b = x[0] * 1;
          b.narrow(0, 1, 2).mul_(x[1]);
          return b;
        }),
        {R({4}), R({2})});
  check("in-place on a view of a view", fn([](const Ts& x) {
          Tensor b = x[0] * 1;
          b.t().select(0, 1).add_(x[1] * x[1]);
          return b * b;
        }),
        {R({2, 3}), R({2})});
  check("to complex and back", fn([](const Ts& x) { return x[0].to(kComplex128).to(kFloat64) * 1; }), {R({3})});
  check("copy_", fn([](const Ts& x) {
          Tensor out = zeros({2, 3}, x[0].options().requires_grad(false));
          out.copy_(x[0]);
          return out * 2;
        }),
        {R({3})});
}

TEST_P(Gradcheck, Joins) {
  check("cat", fn([](const Ts& x) { return cat({x[0], x[1]}, 1); }), {R({2, 1}), R({2, 3})});
  check("stack", fn([](const Ts& x) { return stack({x[0], x[1]}, 0); }), {R({3}), R({3})});
  check("chunk", [](const Ts& x) { return x[0].chunk(2, 0); }, {R({4, 2})});
  check("split", [](const Ts& x) { return x[0].split(IntList{1, 3}, 1); }, {R({2, 4})});
}

TEST_P(Gradcheck, Selections) {
  Tensor mask = B({true, false, true, false});
  check("where", fn([mask](const Ts& x) { return where(mask, x[0], x[1]); }), {R({4}), R({2, 4})});
  check("where scalar", fn([mask](const Ts& x) { return where(mask, x[0], 0.5); }), {R({4})});
  check("masked_fill", fn([mask](const Ts& x) { return x[0].masked_fill(mask, 2.0); }), {R({4})});
  check("masked_fill tensor", fn([mask](const Ts& x) { return x[0].masked_fill(mask, x[1]); }), {R({4}), R({})});
  check("clamp", fn([](const Ts& x) { return x[0].clamp(-0.65, -0.35); }), {D({8})});  // D: -1.0, -0.9, ..., -0.3
  check("clamp tensors", fn([](const Ts& x) { return x[0].clamp(x[1], x[2]); }),
        {D({6}), R({6}) * 0.1 - 2.0, R({6}) * 0.1 + 0.3});
  check("softmax", fn([](const Ts& x) { return x[0].softmax(1); }), {R({2, 3})});
  check("log_softmax", fn([](const Ts& x) { return x[0].log_softmax(0); }), {R({2, 3})});
}

TEST_P(Gradcheck, Functional) {
  check("linear", fn([](const Ts& x) { return F::linear(x[0], x[1], x[2]); }), {R({2, 3}), R({4, 3}), R({4})});
  check("linear 3-d", fn([](const Ts& x) { return F::linear(x[0], x[1], x[2]); }), {R({2, 2, 3}), R({4, 3}), R({4})});
  check("conv2d", fn([](const Ts& x) {
          return conv2d(x[0], x[1], x[2], {2, 1}, {1, 1});
        }),
        {R({2, 2, 4, 4}), R({3, 2, 3, 2}), R({3})});
  check("conv2d groups dilation", fn([](const Ts& x) {
          return conv2d(x[0], x[1], {}, {1, 1}, {0, 1}, {2, 1}, 2);
        }),
        {R({1, 4, 5, 3}), R({2, 2, 2, 2})});
  check("max_pool2d", fn([](const Ts& x) { return F::max_pool2d(x[0], {2, 2}, {}, {1}); }), {D({1, 2, 4, 3})});
  check("avg_pool2d", fn([](const Ts& x) {
          return F::avg_pool2d(x[0], {3, 2}, {2, 1}, {1, 1}, true, false);
        }),
        {R({2, 1, 4, 4})});
  check("dropout", fn([](const Ts& x) {
          manual_seed(3);  // the same mask on every evaluation
          return F::dropout(x[0], 0.4, true);
        }),
        {R({8})});
  check("batch_norm", fn([](const Ts& x) {
          Tensor mean = zeros({3}, x[0].options().requires_grad(false)), var = ones({3}, mean.options());
          return F::batch_norm(x[0], mean, var, x[1], x[2], true, 0.1, 1e-5);
        }),
        {R({4, 3, 2}), R({3}), R({3})});
  Tensor target = I({2, 0, 1});
  check("nll_loss", fn([target](const Ts& x) { return F::nll_loss(x[0], target, "mean", -100); }), {R({3, 4})});
  check("nll_loss sum, ignored class", fn([target](const Ts& x) { return F::nll_loss(x[0], target, "sum", 0); }),
        {R({3, 4})});
  check("nll_loss none", fn([target](const Ts& x) { return F::nll_loss(x[0], target, "none", -100); }), {R({3, 4})});
  check("cross_entropy mean", fn([target](const Ts& x) { return F::cross_entropy(x[0], target); }), {R({3, 4})});
  check("cross_entropy", fn([target](const Ts& x) { return F::cross_entropy(x[0], target, "sum", 0, 0.1); }),
        {R({3, 4})});
  check("cross_entropy probabilities", fn([](const Ts& x) { return F::cross_entropy(x[0], x[1].softmax(1)); }),
        {R({2, 3}), R({2, 3})});
  check("mse_loss", fn([](const Ts& x) { return F::mse_loss(x[0], x[1], "mean"); }), {R({2, 3}), R({2, 3})});
}

TEST_P(Gradcheck, Fft) {
  check("fft", fn([](const Ts& x) { return fft::fft(x[0]); }), {R({2, 4}, kComplex128)});
  check("ifft ortho", fn([](const Ts& x) { return fft::ifft(x[0], std::nullopt, 0, "ortho"); }),
        {R({3, 2}, kComplex128)});
  check("fft of real, padded", fn([](const Ts& x) { return fft::fft(x[0], 6); }), {R({4})});
  check("fft2", fn([](const Ts& x) { return fft::fft2(x[0]); }), {R({2, 3}, kComplex128)});
  check("rfft", fn([](const Ts& x) { return fft::rfft(x[0]); }), {R({2, 5})});
  check("irfft", fn([](const Ts& x) { return fft::irfft(x[0], 6); }), {R({4}, kComplex128)});
}

// The cuda device's gradients equal the cpu's for the same inputs.
TEST_P(Gradcheck, DeviceGradientsMatchTheCpus) {
  if (!dev_.is_cuda()) GTEST_SKIP() << "compares a cuda device with the cpu";
  auto grads_on = [](Device d, const Tensor& x_cpu, const Tensor& w_cpu) {
    Tensor x = x_cpu.to(d).detach().requires_grad_(), w = w_cpu.to(d).detach().requires_grad_();
    Tensor h = F::max_pool2d(conv2d(x, w, {}, {1, 1}, {1, 1}).relu(), {2, 2});
    Tensor loss = F::cross_entropy(h.flatten(1, -1).log_softmax(1), tensor({1, 0}, TensorOptions(kInt64).device(d)));
    loss.backward();
    return std::pair{x.grad().cpu(), w.grad().cpu()};
  };
  Tensor x = randn({2, 1, 4, 4}, kFloat64), w = randn({2, 1, 3, 3}, kFloat64);
  auto [gx_cpu, gw_cpu] = grads_on(Device(kCPU), x, w);
  auto [gx, gw] = grads_on(dev_, x, w);
  EXPECT_TRUE(gx.allclose(gx_cpu, 1e-10, 1e-12));
  EXPECT_TRUE(gw.allclose(gw_cpu, 1e-10, 1e-12));
}

EMBER_ON_DEVICES(Gradcheck, "cpu", "cuda:0");

TEST(GradcheckItself, AMismatchThrowsNamingTheInput) {
  struct Wrong : autograd::Function<Wrong> {
    static Tensor forward(autograd::AutogradContext*, Tensor x) { return x * 2; }
    static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0] * 3}; }
  };
  auto x = randn({3}, TensorOptions(kFloat64).requires_grad(true));
  EXPECT_THROW_MSG(autograd::gradcheck([](const Ts& in) { return Ts{Wrong::apply(in[0])}; }, {x}), Error,
                   "Jacobian mismatch for output 0 with respect to input 0");
}

}  // namespace
