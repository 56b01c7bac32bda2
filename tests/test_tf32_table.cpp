// The rows of docs/tf32.md, flag by flag: each op or module that multiplies matrices or
// convolves, on the cpu (TF32 never applies: neither flag changes a result) and on a cuda
// device (emulated where there is no GPU: its own flag changes a float32 result, the other
// flag does not). The matmul flag governs matrix products, Linear, attention and the RNN
// cells; the cudnn flag governs convolutions and the RNN/LSTM/GRU modules. test_tf32.cpp,
// test_rnn.cpp and test_adaptive_log_softmax.cpp hold further rows of the table. Then the same
// ops under PyTorch 2.9's fp32_precision settings, and cuBLAS's float16 / bfloat16 switches
// (reduced-precision reductions, float16 accumulation), which emulated devices emulate.
#include <functional>
#include <string>
#include <vector>

#include "test_support.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

using BlasFlagRef = backends::detail::BlasFlag*;

class Tf32Table : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    manual_seed(7);
  }
  void TearDown() override {
    backends::fp32_precision = "ieee";
    backends::cudnn.fp32_precision = "none";
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
    backends::cuda::matmul.allow_fp16_reduced_precision_reduction = true;
    backends::cuda::matmul.allow_bf16_reduced_precision_reduction = true;
    backends::cuda::matmul.allow_fp16_accumulation = false;
  }
  Tensor randn_on(const IntList& shape) const { return randn(shape, TensorOptions(kFloat32).device(dev_)); }

  /// Expects `got` to be the host kernels' values: `cpu` on the cpu, `emulated` on an emulated
  /// device. On a GPU, whose cuBLAS picks its own accumulation order and split, only that the
  /// driver path ran and stayed near `cpu` (the GPU kit's smoke test of the cuBLAS settings).
  void expect_values(const std::vector<float>& got, float cpu, float emulated, const std::string& what) const {
    if (dev_.is_cpu() || cuda::backend_name() == "emulated") {
      EXPECT_EQ(got, std::vector<float>(got.size(), dev_.is_cpu() ? cpu : emulated)) << what;
    } else {
      for (float value : got) EXPECT_NEAR(value, cpu, 0.05 * cpu) << what << " on " << cuda::backend_name();
    }
  }

  enum class Flag { kMatmul, kCudnn };

  /// `run` (a float32 computation on dev_) follows `flag` on a cuda device and ignores the
  /// other flag; on the cpu it ignores both.
  void expect_follows(Flag flag, const std::function<Tensor()>& run, const std::string& what) const {
    auto set = [](bool matmul, bool cudnn) {
      backends::cuda::matmul.allow_tf32 = matmul;
      backends::cudnn.allow_tf32 = cudnn;
    };
    const bool matmul = flag == Flag::kMatmul;
    set(true, true);
    const Tensor tf32 = run().detach().cpu();
    set(matmul, !matmul);  // the other flag off
    const Tensor other_off = run().detach().cpu();
    set(false, false);
    const Tensor full = run().detach().cpu();
    set(true, true);
    EXPECT_EQ(tf32.dtype(), kFloat32) << what;
    EXPECT_TRUE(equal(tf32, other_off)) << what << ": the " << (matmul ? "cudnn" : "matmul") << " flag changed it";
    if (dev_.is_cpu()) {
      EXPECT_TRUE(equal(tf32, full)) << what << ": the cpu rounded to TF32";
    } else {
      EXPECT_FALSE(equal(tf32, full)) << what << ": the " << (matmul ? "matmul" : "cudnn")
                                      << " flag changed nothing on " << dev_;
      EXPECT_TRUE(allclose(tf32, full, 1e-2, 1e-2)) << what;  // TF32 is close, not wrong
    }
  }
  void expect_follows_matmul_flag(const std::function<Tensor()>& run, const std::string& what) const {
    expect_follows(Flag::kMatmul, run, what);
  }
};

TEST_P(Tf32Table, MatrixProductsFollowTheMatmulFlag) {
  const Tensor a = randn_on({16, 32}), b = randn_on({32, 24}), bias = randn_on({16, 24});
  const Tensor a3 = randn_on({3, 16, 32}), b3 = randn_on({3, 32, 24}), bias3 = randn_on({3, 16, 24});
  expect_follows_matmul_flag([&] { return matmul(a, b); }, "matmul");
  expect_follows_matmul_flag([&] { return matmul(a3, b); }, "matmul (broadcast)");
  expect_follows_matmul_flag([&] { return addmm(bias, a, b); }, "addmm");
  expect_follows_matmul_flag([&] { return bmm(a3, b3); }, "bmm");
  expect_follows_matmul_flag([&] { return baddbmm(bias3, a3, b3); }, "baddbmm");
}

TEST_P(Tf32Table, LinearFollowsTheMatmulFlagForwardAndBackward) {
  nn::Linear linear(32, 24);
  linear.to(dev_);
  const Tensor x2 = randn_on({16, 32}), x3 = randn_on({4, 5, 32});
  expect_follows_matmul_flag([&] { return linear(x2); }, "Linear (2-D input)");
  expect_follows_matmul_flag([&] { return linear(x3); }, "Linear (3-D input)");
  expect_follows_matmul_flag([&] { return F::linear(x2, linear.weight); }, "F::linear without bias");
  expect_follows_matmul_flag(
      [&] {
        linear.zero_grad();
        (linear(x2) * x2.narrow(1, 0, 24)).sum().backward();
        return linear.weight.grad();
      },
      "Linear's weight gradient");
}

TEST_P(Tf32Table, AttentionFollowsTheMatmulFlag) {
  const Tensor q = randn_on({2, 3, 8, 16}), k = randn_on({2, 3, 8, 16}), v = randn_on({2, 3, 8, 16});
  expect_follows_matmul_flag([&] { return F::scaled_dot_product_attention(q, k, v); }, "scaled_dot_product_attention");
  nn::MultiheadAttention attention(16, 4);
  attention.to(dev_);
  const Tensor x = randn_on({8, 2, 16});
  expect_follows_matmul_flag([&] { return attention.forward(x); }, "MultiheadAttention");
}

TEST_P(Tf32Table, RecurrentModulesFollowTheCudnnFlagAndCellsTheMatmulFlag) {
  // test_rnn.cpp's RnnTf32 covers the LSTM (with projection) and GRUCell; these are the rest.
  nn::GRU gru(8, 16);
  nn::RNN rnn(8, 16, 1, "relu");
  nn::RNNCell rnn_cell(8, 16);
  nn::LSTMCell lstm_cell(8, 16);
  for (nn::Module* m : std::vector<nn::Module*>{&gru, &rnn, &rnn_cell, &lstm_cell}) m->to(dev_);
  const Tensor x = randn_on({5, 3, 8});
  expect_follows(
      Flag::kCudnn, [&] { return gru.forward(x).first; }, "GRU");
  expect_follows(
      Flag::kCudnn, [&] { return rnn.forward(x).first; }, "RNN");
  expect_follows(
      Flag::kMatmul, [&] { return rnn_cell.forward(x[0]); }, "RNNCell");
  expect_follows(
      Flag::kMatmul, [&] { return lstm_cell.forward(x[0]).first; }, "LSTMCell");
}

TEST_P(Tf32Table, Conv2dModuleFollowsTheCudnnFlag) {
  nn::Conv2d conv(4, 6, 3, 1, 1);
  conv.to(dev_);
  const Tensor x = randn_on({2, 4, 9, 9});
  expect_follows(
      Flag::kCudnn, [&] { return conv(x); }, "Conv2d");
}

TEST_P(Tf32Table, Fp32PrecisionSettingsGovernTheSameOps) {
  const Tensor a = randn_on({16, 32}), b = randn_on({32, 24}), x = randn_on({5, 3, 8}), image = randn_on({2, 4, 9, 9});
  nn::GRU gru(8, 16);
  nn::Conv2d conv(4, 6, 3, 1, 1);
  gru.to(dev_);
  conv.to(dev_);
  auto results = [&] {
    return std::vector<Tensor>{matmul(a, b).cpu(), gru.forward(x).first.detach().cpu(), conv(image).detach().cpu()};
  };
  const std::vector<Tensor> tf32 = results();  // the defaults: TF32 for all three
  backends::cuda::matmul.allow_tf32 = false;
  backends::cudnn.allow_tf32 = false;
  const std::vector<Tensor> ieee = results();
  backends::cuda::matmul.allow_tf32 = true;
  backends::cudnn.allow_tf32 = true;
  // Each family's own setting, then each through inheritance, gives what the legacy flags gave.
  auto expect_results = [&](const std::vector<bool>& uses_tf32, const std::string& what) {
    const std::vector<Tensor> got = results();
    for (size_t i = 0; i < got.size(); ++i) {
      const bool tf32_expected = uses_tf32[i] && !dev_.is_cpu();  // the cpu never rounds to TF32
      EXPECT_TRUE(equal(got[i], tf32_expected ? tf32[i] : ieee[i])) << what << ": "
                                                                    << (i == 0   ? "matmul"
                                                                        : i == 1 ? "GRU"
                                                                                 : "Conv2d")
                                                                    << " on " << dev_;
    }
  };
  backends::cuda::matmul.fp32_precision = "ieee";
  expect_results({false, true, true}, "matmul 'ieee'");
  backends::cudnn.rnn.fp32_precision = "ieee";
  expect_results({false, false, true}, "rnn 'ieee'");
  backends::cudnn.conv.fp32_precision = "ieee";
  expect_results({false, false, false}, "conv 'ieee'");
  backends::cuda::matmul.fp32_precision = "none";
  backends::cudnn.rnn.fp32_precision = "none";
  backends::cudnn.conv.fp32_precision = "none";
  expect_results({false, false, false}, "all 'none' under a global 'ieee'");
  backends::fp32_precision = "tf32";
  expect_results({true, true, true}, "all 'none' under a global 'tf32'");
  backends::cudnn.fp32_precision = "ieee";
  expect_results({false, false, false}, "all 'none' under cudnn 'ieee'");
  backends::cudnn.conv.fp32_precision = "tf32";
  expect_results({false, false, true}, "conv 'tf32' under cudnn 'ieee'");
  if (!dev_.is_cpu()) {
    EXPECT_FALSE(equal(tf32[0], ieee[0])) << "TF32 changed nothing on " << dev_;
  }
}

// Expected values: tests/precision_flags_expected.py (/usr/bin/python3: PyTorch 1.13 and numpy),
// which emulates the roundings that emulated devices emulate (Note [Matmul math] in
// src/kernels/matmul_math.h); the cpu ignores the switches, as PyTorch's does.
TEST_P(Tf32Table, Float16AccumulationLosesSmallAddendsOnCudaDevicesOnly) {
  // 2048 then 100 ones: 2049 rounds back to 2048 in float16 (its spacing there is 2).
  std::vector<float> column(101, 1.0f);
  column[0] = 2048;
  const Tensor a = ones({1, 101}, TensorOptions(kFloat16).device(dev_));
  const Tensor b = tensor(column).view({101, 1}).to(TensorOptions(kFloat16).device(dev_));
  const Tensor zero = zeros({1}, TensorOptions(kFloat16).device(dev_));
  // matmul, bmm, addmm, baddbmm and Linear with a bias (an addmm).
  auto products = [&] {
    return std::vector<float>{
        matmul(a, b).item<float>(), bmm(a.unsqueeze(0), b.unsqueeze(0)).item<float>(), addmm(zero, a, b).item<float>(),
        baddbmm(zero, a.unsqueeze(0), b.unsqueeze(0)).item<float>(), F::linear(a, b.t(), zero).item<float>()};
  };
  EXPECT_EQ(products(), std::vector<float>(5, 2148.0f));  // the default: float32 accumulation
  backends::cuda::matmul.allow_fp16_accumulation = true;
  expect_values(products(), 2148, 2048, "float16 accumulation");
  // bfloat16 has no such mode: the switch is float16's.
  EXPECT_EQ(matmul(a.to(kBFloat16), b.to(kBFloat16)).item<float>(), 2144.0f);  // 2148 in bfloat16
}

TEST_P(Tf32Table, ReducedPrecisionReductionRoundsSplitKPartialsOnCudaDevicesOnly) {
  // K = 2048, two split-k blocks. Block 1 sums to 2049 (float16) or 257 (bfloat16), which the
  // dtype cannot hold and rounds to even (2048, 256); block 2 adds 1. One rounding of the whole
  // sum gives 2050 (258); rounding the running sum after each block gives 2048 (256).
  struct Case {
    DType dtype;
    float first, second, reduced, exact;
    BlasFlagRef flag;
  };
  for (const auto& [dtype, first, second, reduced, exact, flag] :
       {Case{kFloat16, 1025, 1024, 2048, 2050, &backends::cuda::matmul.allow_fp16_reduced_precision_reduction},
        Case{kBFloat16, 129, 128, 256, 258, &backends::cuda::matmul.allow_bf16_reduced_precision_reduction}}) {
    std::vector<float> column(2048, 0.0f);
    column[0] = first;
    column[1] = second;
    column[1024] = 1;
    const Tensor a = ones({1, 2048}, TensorOptions(dtype).device(dev_));
    const Tensor b = tensor(column).view({2048, 1}).to(TensorOptions(dtype).device(dev_));
    const Tensor zero = zeros({1}, TensorOptions(dtype).device(dev_));
    auto products = [&] {  // matmul and addmm (so Linear with a bias)
      return std::vector<float>{matmul(a, b).item<float>(), addmm(zero, a, b).item<float>()};
    };
    expect_values(products(), exact, reduced, std::string(dtype_name(dtype)) + " allowed");
    *flag = false;
    EXPECT_EQ(products(), std::vector<float>(2, exact)) << dtype_name(dtype) << " disallowed";
    *flag = true;
    // A product within one block has nothing to reduce across blocks.
    EXPECT_EQ(matmul(a.narrow(1, 0, 1024), b.narrow(0, 0, 1024)).item<float>(), dtype == kFloat16 ? 2048 : 256);
  }
}

EMBER_ON_DEVICES(Tf32Table, "cpu", "cuda:0");

}  // namespace
