// The rows of docs/tf32.md that no other test covers flag by flag: every op and module that
// multiplies matrices, each checked on the cpu (TF32 never applies: the flags change nothing)
// and on a cuda device (emulated where there is no GPU: the matmul flag changes a float32
// result, the cudnn flag does not). Convolution, the recurrent family and adaptive
// log-softmax have their rows in test_tf32.cpp, test_rnn.cpp and test_adaptive_log_softmax.cpp.
#include <functional>
#include <string>

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

  /// `run` (a float32 computation on dev_) follows backends::cuda::matmul.allow_tf32 on a
  /// cuda device, ignores backends::cudnn.allow_tf32, and ignores both on the cpu.
  void expect_follows_matmul_flag(const std::function<Tensor()>& run, const std::string& what) const {
    backends::cuda::matmul.allow_tf32 = true;
    const Tensor tf32 = run().detach().cpu();
    backends::cudnn.allow_tf32 = false;
    const Tensor cudnn_off = run().detach().cpu();
    backends::cuda::matmul.allow_tf32 = false;
    const Tensor full = run().detach().cpu();
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
    EXPECT_EQ(tf32.dtype(), kFloat32) << what;
    EXPECT_TRUE(equal(tf32, cudnn_off)) << what << ": the cudnn flag changed a matmul";
    if (dev_.is_cpu()) {
      EXPECT_TRUE(equal(tf32, full)) << what << ": the cpu rounded to TF32";
    } else {
      EXPECT_FALSE(equal(tf32, full)) << what << ": the matmul flag changed nothing on " << dev_;
      EXPECT_TRUE(allclose(tf32, full, 1e-2, 1e-2)) << what;  // TF32 is close, not wrong
    }
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

EMBER_ON_DEVICES(Tf32Table, "cpu", "cuda:0");

}  // namespace
