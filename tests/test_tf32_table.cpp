// The rows of docs/tf32.md, flag by flag: each op or module that multiplies matrices or
// convolves, on the cpu (TF32 never applies: neither flag changes a result) and on a cuda
// device (emulated where there is no GPU: its own flag changes a float32 result, the other
// flag does not). The matmul flag governs matrix products, Linear, attention and the RNN
// cells; the cudnn flag governs convolutions and the RNN/LSTM/GRU modules. test_tf32.cpp,
// test_rnn.cpp and test_adaptive_log_softmax.cpp hold further rows of the table.
#include <functional>
#include <string>
#include <vector>

#include "test_support.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

class Tf32Table : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    manual_seed(7);
  }
  void TearDown() override {
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
  }
  Tensor randn_on(const IntList& shape) const { return randn(shape, TensorOptions(kFloat32).device(dev_)); }

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
  expect_follows(Flag::kCudnn, [&] { return gru.forward(x).first; }, "GRU");
  expect_follows(Flag::kCudnn, [&] { return rnn.forward(x).first; }, "RNN");
  expect_follows(Flag::kMatmul, [&] { return rnn_cell.forward(x[0]); }, "RNNCell");
  expect_follows(Flag::kMatmul, [&] { return lstm_cell.forward(x[0]).first; }, "LSTMCell");
}

TEST_P(Tf32Table, Conv2dModuleFollowsTheCudnnFlag) {
  nn::Conv2d conv(4, 6, 3, 1, 1);
  conv.to(dev_);
  const Tensor x = randn_on({2, 4, 9, 9});
  expect_follows(Flag::kCudnn, [&] { return conv(x); }, "Conv2d");
}

EMBER_ON_DEVICES(Tf32Table, "cpu", "cuda:0");

}  // namespace
