// MultiheadAttention, TransformerEncoderLayer and the character model of
// examples/charlm_model.h against PyTorch 1.13: state dicts saved by PyTorch load under
// their keys and give PyTorch's outputs, attention weights and gradients, on the cpu and on
// a cuda device (emulated without a GPU). The numbers are in transformer_expected.h, made by
// transformer_expected.py (/usr/bin/python3 tests/transformer_expected.py).
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "test_support.h"
#include "transformer_expected.h"

namespace ember::testing {
namespace {

using transformer_expected::Case;

// TF32 would round the products; these comparisons are at float32 precision.
class Transformer : public OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    saved_tf32_ = backends::cuda::matmul.allow_tf32;
    backends::cuda::matmul.allow_tf32 = false;
  }
  void TearDown() override { backends::cuda::matmul.allow_tf32 = saved_tf32_; }

  Tensor value(const Case& c, const std::string& key) const {
    for (const auto& [name, v] : c) {
      if (name == key) return tensor(v.data).reshape(v.shape).to(dev_);
    }
    ADD_FAILURE() << "no expected value '" << key << "'";
    return Tensor();
  }
  // Loads the case's state dict (the module's keys) into `module`, on the device.
  void load(nn::Module& module, const Case& c, const std::string& prefix = "") const {
    nn::StateDict state;
    for (const auto& key : module.state_dict().keys()) state.insert(key, value(c, prefix + key));
    module.load_state_dict(state);
  }
  static void expect_close(const Tensor& got, const Tensor& expected, const std::string& what, double tol = 2e-5) {
    ASSERT_TRUE(got.defined()) << what;
    ASSERT_EQ(got.sizes(), expected.sizes()) << what;
    const std::vector<float> g = got.cpu().contiguous().to(kFloat32).reshape({-1}).to_vector<float>();
    const std::vector<float> e = expected.cpu().contiguous().reshape({-1}).to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << what << " element " << i;
    }
  }
  void expect_param_grads(const nn::Module& module, const Case& c, double tol = 2e-5) const {
    for (const auto& [key, p] : module.named_parameters()) expect_close(p.grad(), value(c, "grad." + key), key, tol);
  }

  bool saved_tf32_ = true;
};

TEST_P(Transformer, SelfAttentionWithCausalAndPaddingMasksMatchesPyTorch) {
  const Case& c = transformer_expected::k_mha_self;
  auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, /*batch_first=*/true);
  EXPECT_EQ(m->named_parameters().keys(),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  m->to(dev_);
  load(*m, c);
  Tensor x = value(c, "x").requires_grad_();
  Tensor causal = arange(3, TensorOptions(dev_)).unsqueeze(0).gt(arange(3, TensorOptions(dev_)).unsqueeze(1));
  Tensor kpm = tensor({{false, false, false}, {false, false, true}}).to(dev_);
  auto [out, weights] = m->forward(x, x, x, kpm, /*need_weights=*/true, causal);
  EXPECT_EQ(out.device(), dev_);
  expect_close(out, value(c, "out"), "out");
  expect_close(weights, value(c, "weights"), "weights");
  (out * value(c, "probe")).sum().backward();
  expect_close(x.grad(), value(c, "grad.x"), "grad.x");
  expect_param_grads(*m, c);
  // is_causal without a mask makes the same causal mask.
  auto [causal_out, no_weights] = m->forward(x, x, x, kpm, /*need_weights=*/false, {}, true, /*is_causal=*/true);
  EXPECT_FALSE(no_weights.defined());
  expect_close(causal_out, value(c, "out"), "is_causal out");
}

TEST_P(Transformer, CrossAttentionWithFloatMaskAndPerHeadWeightsMatchesPyTorch) {
  const Case& c = transformer_expected::k_mha_cross;
  auto m = std::make_shared<nn::MultiheadAttention>(8, 4);
  m->to(dev_);
  load(*m, c);
  Tensor q = value(c, "q").requires_grad_(), k = value(c, "k").requires_grad_(), v = value(c, "v").requires_grad_();
  auto [out, weights] = m->forward(q, k, v, {}, true, value(c, "mask"), /*average_attn_weights=*/false);
  expect_close(out, value(c, "out"), "out");
  expect_close(weights, value(c, "weights"), "weights");
  (out * value(c, "probe")).sum().backward();
  expect_close(q.grad(), value(c, "grad.q"), "grad.q");
  expect_close(k.grad(), value(c, "grad.k"), "grad.k");
  expect_close(v.grad(), value(c, "grad.v"), "grad.v");
  expect_param_grads(*m, c);
}

TEST_P(Transformer, AttentionRefusesBadMasksAndLeavesTheModuleUsable) {
  auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true);
  m->to(dev_);
  Tensor x = randn({2, 3, 8}).to(dev_);
  EXPECT_THROW_MSG(m->forward(x, x, x, {}, true, zeros({4, 4}, TensorOptions(kBool).device(dev_))), ValueError,
                   "The shape of the 2D attn_mask is torch.Size([4, 4]), but should be (3, 3).");
  EXPECT_THROW_MSG(m->forward(x, x, x, {}, true, zeros({2, 3, 3}, TensorOptions(dev_))), ValueError,
                   "The shape of the 3D attn_mask is torch.Size([2, 3, 3]), but should be (4, 3, 3).");
  EXPECT_THROW_MSG(m->forward(x, x, x, {}, true, zeros({3, 3}, TensorOptions(kInt64).device(dev_))), TypeError,
                   "only bool and floating types of attn_mask are supported");
  EXPECT_THROW_MSG(m->forward(x, x, x, zeros({2, 4}, TensorOptions(kBool).device(dev_))), ValueError,
                   "expecting key_padding_mask shape of (2, 3), but got torch.Size([2, 4])");
  EXPECT_THROW_MSG(m->forward(x, x, x, zeros({2, 3}, TensorOptions(kInt32).device(dev_))), TypeError,
                   "only bool and floating types of key_padding_mask are supported");
  EXPECT_THROW_MSG(m->forward(randn({2, 3, 6}).to(dev_)), ValueError, "was expecting embedding dimension of 8, but got 6");
  EXPECT_EQ(m->forward(x).sizes(), (std::vector<int64_t>{2, 3, 8}));
}

EMBER_ON_DEVICES(Transformer, "cpu", "cuda:0");

TEST(TransformerModules, ConstructorsCheckTheirArguments) {
  EXPECT_THROW_MSG(nn::MultiheadAttention(10, 3), ValueError, "embed_dim must be divisible by num_heads");
  EXPECT_THROW_MSG(nn::MultiheadAttention(8, 0), ValueError, "embed_dim and num_heads must be greater than 0");
  EXPECT_THROW_MSG(nn::MultiheadAttention(8, 2, 1.5), ValueError, "dropout probability has to be between 0 and 1");
  nn::MultiheadAttention no_bias(8, 2, 0.0, /*bias=*/false);
  EXPECT_EQ(no_bias.named_parameters().keys(), (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
}

TEST(TransformerModules, AttentionStartsAsPyTorchs) {
  nn::MultiheadAttention m(8, 2);
  // xavier_uniform_ on [24, 8]: bound sqrt(6 / 32); zero biases.
  const double bound = std::sqrt(6.0 / 32.0);
  EXPECT_LE(m.in_proj_weight.abs().max().item<float>(), bound);
  EXPECT_GT(m.in_proj_weight.abs().max().item<float>(), bound / 2);
  EXPECT_TRUE(m.in_proj_bias.equal(zeros({24})));
  EXPECT_TRUE(m.out_proj->bias.equal(zeros({8})));
  auto copy = std::dynamic_pointer_cast<nn::MultiheadAttention>(m.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(copy->in_proj_weight.equal(m.in_proj_weight));
  EXPECT_FALSE(copy->in_proj_weight.is_same(m.in_proj_weight));
}

}  // namespace
}  // namespace ember::testing
