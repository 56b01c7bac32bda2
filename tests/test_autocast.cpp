// ember::autocast (Note [Autocast] in src/ops/autocast.cpp) on the cpu and on cuda devices
// (emulated without a GPU). Expected dtypes and numbers come from PyTorch 1.13
// (/usr/bin/python3) under torch.autocast('cpu', dtype=torch.bfloat16), except where PyTorch
// 2.x differs (conv_transpose joined the cpu's lower-precision list in 2.x); the cuda table is
// PyTorch 2.x's documented lists (autocast_mode.cpp), as 1.13 runs no cuda autocast here.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "ops_on_devices.h"
#include "test_support.h"

namespace ember::testing {
namespace {

namespace F = nn::functional;

struct Inputs {
  explicit Inputs(Device dev) {
    manual_seed(5);
    const auto f32 = TensorOptions(kFloat32).device(dev);
    x = randn({4, 8}, f32);
    w = randn({6, 8}, f32).requires_grad_();
    b = randn({6}, f32);
    img = randn({2, 3, 8, 8}, f32);
    cw = randn({4, 3, 3, 3}, f32);
    y = tensor({1, 2, 3, 0}, TensorOptions(kInt64).device(dev));
    pos = x.abs() + 0.5;
  }
  Tensor x, w, b, img, cw, y, pos;
};

struct Row {
  const char* op;
  std::function<Tensor(const Inputs&, DType)> run;  // `low`: the autocast dtype, for inputs already in it
};

std::vector<Row> rows() {
  return {
      {"matmul", [](const Inputs& in, DType) { return matmul(in.x, in.w.t()); }},
      {"bmm", [](const Inputs& in, DType) { return bmm(in.x.unsqueeze(0), in.w.t().unsqueeze(0)); }},
      {"addmm", [](const Inputs& in, DType) { return addmm(in.b, in.x, in.w.t()); }},
      {"baddbmm",
       [](const Inputs& in, DType) {
         return baddbmm(in.b.view({1, 1, 6}), in.x.unsqueeze(0), in.w.t().unsqueeze(0));
       }},
      {"linear", [](const Inputs& in, DType) { return F::linear(in.x, in.w, in.b); }},
      {"conv2d", [](const Inputs& in, DType) { return F::conv2d(in.img, in.cw); }},
      {"conv_transpose2d", [](const Inputs& in, DType) { return F::conv_transpose2d(in.img, in.cw.transpose(0, 1)); }},
      {"exp", [](const Inputs& in, DType low) { return in.x.to(low).exp(); }},
      {"log", [](const Inputs& in, DType low) { return in.pos.to(low).log(); }},
      {"rsqrt", [](const Inputs& in, DType low) { return in.pos.to(low).rsqrt(); }},
      {"pow", [](const Inputs& in, DType low) { return in.x.to(low).pow(2); }},
      {"softmax", [](const Inputs& in, DType low) { return softmax(in.x.to(low), 1); }},
      {"log_softmax", [](const Inputs& in, DType low) { return log_softmax(in.x.to(low), 1); }},
      {"sum", [](const Inputs& in, DType low) { return in.x.to(low).sum(); }},
      {"cumsum", [](const Inputs& in, DType low) { return in.x.to(low).cumsum(0); }},
      {"logsumexp", [](const Inputs& in, DType low) { return in.x.to(low).logsumexp({1}); }},
      {"layer_norm", [](const Inputs& in, DType low) { return F::layer_norm(in.x.to(low), {8}); }},
      {"nll_loss", [](const Inputs& in, DType low) { return F::nll_loss(in.x.to(low), in.y); }},
      {"cross_entropy", [](const Inputs& in, DType low) { return F::cross_entropy(in.x.to(low), in.y); }},
      {"mse_loss", [](const Inputs& in, DType low) { return F::mse_loss(in.x.to(low), in.x); }},
      {"cdist", [](const Inputs& in, DType low) { return cdist(in.x.to(low), in.x.to(low)); }},
      {"cat",
       [](const Inputs& in, DType low) {
         return cat({in.x.to(low), in.x}, 0);
       }},
      {"stack",
       [](const Inputs& in, DType low) {
         return stack({in.x.to(low), in.x}, 0);
       }},
      {"relu", [](const Inputs& in, DType) { return relu(in.x); }},
      {"add", [](const Inputs& in, DType low) { return in.x.to(low) + in.x.to(low); }},
      {"mean", [](const Inputs& in, DType low) { return in.x.to(low).mean(); }},
      {"grid_sample",
       [](const Inputs& in, DType low) {
         return F::grid_sample(in.img.to(low), zeros({2, 4, 4, 2}, TensorOptions(kFloat32).device(in.img.device())),
                               "bilinear", "zeros", false);
       }},
  };
}

void expect_dtypes(Device dev, DType low, const std::vector<std::pair<std::string, DType>>& expected) {
  const Inputs in(dev);
  const std::vector<Row> all = rows();
  ASSERT_EQ(all.size(), expected.size());
  autocast guard(dev.type(), low);
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].op, expected[i].first);
    EXPECT_EQ(all[i].run(in, low).dtype(), expected[i].second) << all[i].op;
  }
}

TEST(Autocast, CpuDtypesAreTorchs) {
  const DType bf = kBFloat16, f = kFloat32;
  expect_dtypes(Device(kCPU), kBFloat16,
                {{"matmul", bf},
                 {"bmm", bf},
                 {"addmm", bf},
                 {"baddbmm", bf},
                 {"linear", bf},
                 {"conv2d", bf},
                 {"conv_transpose2d", bf},  // PyTorch 2.x (1.13: float32)
                 {"exp", bf},
                 {"log", bf},
                 {"rsqrt", bf},
                 {"pow", bf},
                 {"softmax", bf},
                 {"log_softmax", bf},
                 {"sum", bf},
                 {"cumsum", bf},
                 {"logsumexp", bf},
                 {"layer_norm", bf},
                 {"nll_loss", f},
                 {"cross_entropy", f},
                 {"mse_loss", f},
                 {"cdist", f},
                 {"cat", f},
                 {"stack", f},
                 {"relu", f},
                 {"add", bf},
                 {"mean", bf},
                 {"grid_sample", f}});
}

TEST(Autocast, CudaDtypesAreTorchsLists) {
  EMBER_REQUIRE_DEVICES(1);
  const DType h = kFloat16, f = kFloat32;
  expect_dtypes(Device(kCUDA, 0), kFloat16,
                {{"matmul", h},
                 {"bmm", h},
                 {"addmm", h},
                 {"baddbmm", h},
                 {"linear", h},
                 {"conv2d", h},
                 {"conv_transpose2d", h},
                 {"exp", f},
                 {"log", f},
                 {"rsqrt", f},
                 {"pow", f},
                 {"softmax", f},
                 {"log_softmax", f},
                 {"sum", f},
                 {"cumsum", f},
                 {"logsumexp", f},
                 {"layer_norm", f},
                 {"nll_loss", f},
                 {"cross_entropy", f},
                 {"mse_loss", f},
                 {"cdist", f},
                 {"cat", f},  // in no cuda list: float16 and float32 promote as usual
                 {"stack", f},
                 {"relu", f},
                 {"add", h},
                 {"mean", h},
                 {"grid_sample", f}});  // promote: float16 input, float32 grid
}

TEST(Autocast, TheOtherDeviceTypeIsLeftAlone) {
  EMBER_REQUIRE_DEVICES(1);
  const Inputs cpu{Device(kCPU)};
  autocast guard(kCUDA);
  EXPECT_EQ(matmul(cpu.x, cpu.w.t()).dtype(), kFloat32);
  autocast cpu_guard(kCPU);
  EXPECT_EQ(matmul(cpu.x, cpu.w.t()).dtype(), kBFloat16);
}

TEST(Autocast, Float64IsNeverCast) {
  const Tensor a = ones({2, 2}, TensorOptions(kFloat64));
  autocast guard(kCPU);
  EXPECT_EQ(matmul(a, a).dtype(), kFloat64);
}

// PyTorch 1.13: x = [[1.5, -2.25, .3], [.7, 1.1, -.9]], w = [[.12, -.5, 2.2], [1.3, .01, -.77]]
// and b = [.1, -.2] (both requiring grad); under torch.autocast('cpu', dtype=torch.bfloat16):
// out = F.linear(x, w, b); loss = (out.float() * [[1, 2], [3, -1]]).sum(); loss.backward().
// w.grad is the bfloat16 product accumulated in float32 and rounded once, PyTorch's
// (g.t() @ x.bfloat16().float()).bfloat16() with g = [[1, 2], [3, -1]]: 1.13's cpu bfloat16
// kernel gives 1.0625 for w.grad[0][1], the bfloat16 rounding of one of its products first.
TEST(Autocast, CpuLinearValuesAndGradientsAreTorchs) {
  const Tensor x = tensor({{1.5f, -2.25f, 0.3f}, {0.7f, 1.1f, -0.9f}});
  const Tensor w = tensor({{0.12f, -0.5f, 2.2f}, {1.3f, 0.01f, -0.77f}}).requires_grad_();
  const Tensor b = tensor({0.1f, -0.2f}).requires_grad_();
  Tensor out;
  {
    autocast guard(kCPU, kBFloat16);
    out = F::linear(x, w, b);
    (out.to(kFloat32) * tensor({{1.0f, 2.0f}, {3.0f, -1.0f}})).sum().backward();
  }
  EXPECT_EQ(out.dtype(), kBFloat16);
  expect_values(out.to(kFloat32), {2.0625, 1.4921875, -2.34375, 1.40625}, 0);
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  expect_values(w.grad(), {3.59375, 1.0546875, -2.390625, 2.296875, -5.59375, 1.5}, 0);
  expect_values(b.grad(), {4.0, 1.0}, 0);
}

// The same linear on a cuda device under float16 autocast equals the cpu's float16 math:
// PyTorch 1.13 F.linear(x.half().float(), w.half().float(), b.half().float()).half().
TEST(Autocast, CudaLinearRunsInFloat16) {
  EMBER_REQUIRE_DEVICES(1);
  const Device dev(kCUDA, 0);
  const Tensor x = tensor({{1.5f, -2.25f, 0.3f}, {0.7f, 1.1f, -0.9f}}).to(dev);
  const Tensor w = tensor({{0.12f, -0.5f, 2.2f}, {1.3f, 0.01f, -0.77f}}).to(dev).requires_grad_();
  const Tensor b = tensor({0.1f, -0.2f}).to(dev).requires_grad_();
  autocast guard(kCUDA);
  const Tensor out = F::linear(x, w, b);
  EXPECT_EQ(out.dtype(), kFloat16);
  EXPECT_EQ(out.device(), dev);
  expect_values(out.to(kFloat32), {2.064453125, 1.49609375, -2.345703125, 1.4140625}, 0);
  out.to(kFloat32).sum().backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
}

// DataParallel's replicas run on threads of their own: the caller's autocast goes with them,
// as PyTorch's parallel_apply enters it in each thread.
TEST(Autocast, DataParallelReplicasRunUnderTheCallersAutocast) {
  EMBER_REQUIRE_DEVICES(2);
  manual_seed(9);
  auto layer = std::make_shared<nn::Linear>(8, 4);
  layer->to(Device(kCUDA, 0));
  nn::DataParallel parallel(layer, {0, 1});
  const Tensor x = randn({6, 8}, TensorOptions(kFloat32).device(Device(kCUDA, 0)));
  EXPECT_EQ(parallel.forward(x).dtype(), kFloat32);
  Tensor out;
  {
    autocast guard(kCUDA);
    out = parallel.forward(x);
  }
  EXPECT_EQ(out.dtype(), kFloat16);
  out.to(kFloat32).sum().backward();
  EXPECT_EQ(layer->weight.grad().dtype(), kFloat32);
  EXPECT_FALSE(is_autocast_enabled(kCUDA));
}

TEST(Autocast, GuardsNestAndRestore) {
  EXPECT_FALSE(is_autocast_enabled(kCUDA));
  EXPECT_FALSE(is_autocast_enabled(kCPU));
  EXPECT_EQ(get_autocast_dtype(kCUDA), kFloat16);
  EXPECT_EQ(get_autocast_dtype(kCPU), kBFloat16);
  {
    autocast outer(kCPU);
    EXPECT_TRUE(is_autocast_enabled(kCPU));
    EXPECT_FALSE(is_autocast_enabled(kCUDA));
    {
      autocast inner(kCPU, kFloat16, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(kCPU));
      EXPECT_EQ(get_autocast_dtype(kCPU), kFloat16);
      const Tensor a = ones({2, 2});
      EXPECT_EQ(matmul(a, a).dtype(), kFloat32);
    }
    EXPECT_TRUE(is_autocast_enabled(kCPU));
    EXPECT_EQ(get_autocast_dtype(kCPU), kBFloat16);
    autocast cuda_guard("cuda", kBFloat16);
    EXPECT_TRUE(is_autocast_enabled(kCUDA));
    EXPECT_EQ(get_autocast_dtype(kCUDA), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(kCPU));
  EXPECT_FALSE(is_autocast_enabled(kCUDA));
  EXPECT_EQ(get_autocast_dtype(kCUDA), kFloat16);
}

TEST(Autocast, StateIsPerThread) {
  autocast guard(kCPU);
  bool other_enabled = true;
  DType other_dtype = kFloat32;
  std::thread t([&] {
    other_enabled = is_autocast_enabled(kCPU);
    const Tensor a = ones({2, 2});
    other_dtype = matmul(a, a).dtype();
  });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_dtype, kFloat32);
  EXPECT_TRUE(is_autocast_enabled(kCPU));
}

TEST(Autocast, BadDeviceTypeOrDtypeIsRefusedAndStateKept) {
  EXPECT_THROW_MSG(autocast("xla"), ValueError, "User specified an unsupported autocast device_type 'xla'");
  EXPECT_THROW_MSG(autocast(kCPU, kInt32), TypeError, "In CPU autocast, but the target dtype");
  EXPECT_THROW_MSG(autocast(kCUDA, kFloat64), TypeError, "CUDA Autocast only supports dtypes of torch.float16 and");
  EXPECT_THROW_MSG(set_autocast_dtype(kCPU, kInt64), TypeError, "In CPU autocast");
  EXPECT_FALSE(is_autocast_enabled(kCPU));
  EXPECT_FALSE(is_autocast_enabled(kCUDA));
  EXPECT_EQ(get_autocast_dtype(kCPU), kBFloat16);
  // A disabled guard accepts any dtype, as PyTorch's (it warns and disables).
  autocast off(kCPU, kInt32, /*enabled=*/false);
  EXPECT_FALSE(is_autocast_enabled(kCPU));
}

// PyTorch's weight cast cache: within one outermost guard a float32 leaf that requires grad
// is cast once, so an in-place change under no_grad is not seen until the guard ends; with
// cache_enabled=false every use casts again.
TEST(Autocast, LeafCastsAreCachedPerOutermostGuard) {
  const Tensor x = ones({1, 2});
  const Tensor w = ones({1, 2}).requires_grad_();
  auto bump = [&] {
    NoGradGuard no_grad;
    const_cast<Tensor&>(w).mul_(tensor(2.0f));
  };
  {
    autocast guard(kCPU);
    EXPECT_EQ(F::linear(x, w).item<float>(), 2.0f);
    bump();
    {
      autocast nested(kCPU);
      EXPECT_EQ(F::linear(x, w).item<float>(), 2.0f);  // still the cached copy
    }
    EXPECT_EQ(F::linear(x, w).item<float>(), 2.0f);
  }
  {
    autocast guard(kCPU);  // a new outermost guard casts again
    EXPECT_EQ(F::linear(x, w).item<float>(), 4.0f);
  }
  {
    autocast guard(kCPU, std::nullopt, true, /*cache_enabled=*/false);
    bump();
    EXPECT_EQ(F::linear(x, w).item<float>(), 8.0f);
    bump();
    EXPECT_EQ(F::linear(x, w).item<float>(), 16.0f);
  }
  EXPECT_TRUE(is_autocast_cache_enabled());
  {  // a nested guard of the other dtype gets its own cast, not the outer guard's
    autocast guard(kCPU, kBFloat16);
    EXPECT_EQ(F::linear(x, w).dtype(), kBFloat16);
    {
      autocast nested(kCPU, kFloat16);
      EXPECT_EQ(F::linear(x, w).dtype(), kFloat16);
    }
    EXPECT_EQ(F::linear(x, w).dtype(), kBFloat16);
  }
}

// Backward inside the guard runs the forward's dtypes: the same gradients as outside it.
TEST(Autocast, BackwardIsNotAutocast) {
  const Tensor x = tensor({{1.5f, -2.25f, 0.3f}, {0.7f, 1.1f, -0.9f}});
  auto grad_of = [&](bool backward_inside) {
    const Tensor w = tensor({{0.12f, -0.5f, 2.2f}, {1.3f, 0.01f, -0.77f}}).requires_grad_();
    Tensor loss;
    {
      autocast guard(kCPU);
      loss = F::linear(x, w).to(kFloat32).exp().sum();
      if (backward_inside) loss.backward();
    }
    if (!backward_inside) loss.backward();
    return w.grad();
  };
  const Tensor inside = grad_of(true), outside = grad_of(false);
  EXPECT_EQ(inside.dtype(), kFloat32);
  const std::vector<float> want = outside.to_vector<float>();
  expect_values(inside, std::vector<double>(want.begin(), want.end()), 0);
}

TEST(Autocast, ConvolutionsRunInHalfPrecisionWithoutAutocast) {
  // float16 and bfloat16 convolutions (the lower-precision path of autocast): products in
  // float32, one rounding; gradients in the inputs' dtype.
  const Tensor img = arange(0, 32, 1, TensorOptions(kFloat32)).reshape({1, 2, 4, 4}) / 8;
  const Tensor w = arange(0, 18, 1, TensorOptions(kFloat32)).reshape({1, 2, 3, 3}) / 16;
  const Tensor expected = F::conv2d(img, w);
  for (DType d : {kFloat16, kBFloat16}) {
    const Tensor wd = w.to(d).requires_grad_();
    const Tensor out = F::conv2d(img.to(d), wd);
    EXPECT_EQ(out.dtype(), d);
    const std::vector<float> want = expected.to(d).to(kFloat32).to_vector<float>();
    expect_values(out.to(kFloat32), std::vector<double>(want.begin(), want.end()), 0);
    out.sum().backward();
    EXPECT_EQ(wd.grad().dtype(), d);
  }
  EXPECT_THROW_MSG(F::conv2d(img.to(kFloat16), w), TypeError,
                   "input type (float16) and weight type (float32) should be the same");
}

TEST(Autocast, RecurrentModulesRunInTheAutocastDtype) {
  manual_seed(3);
  nn::LSTM lstm(4, 5);
  const Tensor x = randn({3, 2, 4});
  autocast guard(kCPU);
  auto [out, state] = lstm.forward(x);
  EXPECT_EQ(out.dtype(), kBFloat16);
  EXPECT_EQ(state.first.dtype(), kBFloat16);
  out.to(kFloat32).sum().backward();
  for (const Tensor& p : lstm.parameters()) EXPECT_EQ(p.grad().dtype(), kFloat32);
  // Truncated BPTT feeds the bfloat16 state back with a float32 input: autocast casts both.
  auto [next_out, next_state] = lstm.forward(x, std::pair{state.first.detach(), state.second.detach()});
  EXPECT_EQ(next_out.dtype(), kBFloat16);
  {
    autocast off(kCPU, std::nullopt, /*enabled=*/false);
    EXPECT_THROW_MSG(lstm.forward(x, state), ValueError, "Expected hidden[0] to have the input's type");
  }
  nn::LSTMCell cell(4, 5);
  auto [h, c] = cell.forward(x[0]);
  EXPECT_EQ(h.dtype(), kFloat32);  // the cpu's cells: in no list (see Note [Autocast])
}

}  // namespace
}  // namespace ember::testing
