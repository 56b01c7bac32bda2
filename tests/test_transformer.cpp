// MultiheadAttention, TransformerEncoderLayer and the character model of
// examples/charlm_model.h against PyTorch 1.13: state dicts saved by PyTorch load under
// their keys and give PyTorch's outputs, attention weights and gradients, on the cpu and on
// a cuda device (emulated without a GPU). The numbers are in transformer_expected.h, made by
// transformer_expected.py (/usr/bin/python3 tests/transformer_expected.py).
#include <gtest/gtest.h>

#include "../examples/charlm_model.h"
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
  EXPECT_THROW_MSG(m->forward(randn({2, 3, 6}).to(dev_)), ValueError,
                   "was expecting embedding dimension of 8, but got 6");
  EXPECT_EQ(m->forward(x).sizes(), (std::vector<int64_t>{2, 3, 8}));
}

TEST_P(Transformer, PreNormGeluEncoderLayerMatchesPyTorch) {
  const Case& c = transformer_expected::k_tel_pre_gelu;
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0, "gelu", 1e-5, /*batch_first=*/true,
                                                             /*norm_first=*/true);
  EXPECT_EQ(layer->state_dict().keys(),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                                      "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  layer->to(dev_);
  load(*layer, c);
  Tensor x = value(c, "x").requires_grad_();
  Tensor causal = arange(3, TensorOptions(dev_)).unsqueeze(0).gt(arange(3, TensorOptions(dev_)).unsqueeze(1));
  Tensor out = layer->forward(x, causal);
  expect_close(out, value(c, "out"), "out");
  (out * value(c, "probe")).sum().backward();
  expect_close(x.grad(), value(c, "grad.x"), "grad.x");
  expect_param_grads(*layer, c);
}

TEST_P(Transformer, PostNormReluEncoderLayerWithPaddingMatchesPyTorch) {
  const Case& c = transformer_expected::k_tel_post_relu;
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0);
  layer->to(dev_);
  load(*layer, c);
  Tensor x = value(c, "x").requires_grad_();
  Tensor kpm = tensor({{false, false, true}, {false, false, false}}).to(dev_);
  Tensor out = layer->forward(x, {}, kpm);
  expect_close(out, value(c, "out"), "out");
  (out * value(c, "probe")).sum().backward();
  expect_close(x.grad(), value(c, "grad.x"), "grad.x");
  expect_param_grads(*layer, c);
}

// One training step of examples/charlm's model from PyTorch's weights and batch: the loss,
// the logits, every gradient (the tied embedding's sums both uses), clip_grad_norm_'s total
// and the parameters after AdamW with its two groups.
TEST_P(Transformer, CharModelTrainingStepMatchesPyTorch) {
  const Case& c = transformer_expected::k_charlm_step;
  charlm::Config config;
  config.vocab_size = 11;
  config.context = 6;
  config.width = 8;
  config.layers = 2;
  config.heads = 2;
  config.dropout = 0.0;
  auto model = std::make_shared<charlm::CharLM>(config);
  model->to(dev_);
  load(*model, c);
  EXPECT_TRUE(model->lm_head->weight.is_same(model->wte->weight));
  Tensor idx = value(c, "idx").to(kInt64), targets = value(c, "targets").to(kInt64);
  Tensor logits = model->forward(idx);
  expect_close(logits, value(c, "logits"), "logits");
  Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, 11}), targets.reshape({-1}));
  expect_close(loss, value(c, "loss"), "loss", 1e-6);
  loss.backward();
  expect_param_grads(*model, c, 5e-5);
  Tensor total = nn::utils::clip_grad_norm_(model->parameters(), 0.5);
  expect_close(total, value(c, "clip_total"), "clip total", 1e-5);
  auto [decay, no_decay] = charlm::decay_groups(*model);
  optim::AdamW opt(decay, optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1));
  opt.add_param_group(no_decay, optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.0));
  opt.step();
  for (const auto& [key, t] : model->state_dict()) {
    if (key.ends_with("in_proj_bias")) {
      // The key projection's bias has a zero gradient in exact arithmetic (softmax ignores a
      // constant added to every score of a row): its float gradient is rounding noise, which
      // Adam scales up to full steps of random sign. The query and value parts are compared.
      Tensor expected = value(c, "after." + key);
      expect_close(t.slice(0, 0, 8), expected.slice(0, 0, 8), "after step: " + key + " (query)", 5e-5);
      expect_close(t.slice(0, 16, 24), expected.slice(0, 16, 24), "after step: " + key + " (value)", 5e-5);
      continue;
    }
    expect_close(t, value(c, "after." + key), "after step: " + key, 5e-5);
  }
}

EMBER_ON_DEVICES(Transformer, "cpu", "cuda:0");

// The character model trained for a few steps with dropout from one seed: with TF32 off, a
// cuda device (emulated without a GPU) gives the cpu's losses (dropout's Philox masks and
// the generated tokens are the same on every backend for a seed).
TEST(TransformerDevices, CharModelLossOnACudaDeviceEqualsTheCpus) {
  ensure_cuda();
  const bool saved_tf32 = backends::cuda::matmul.allow_tf32;
  backends::cuda::matmul.allow_tf32 = false;
  charlm::Config config;
  config.vocab_size = 13;
  config.context = 8;
  config.width = 16;
  config.layers = 2;
  config.heads = 2;
  config.dropout = 0.2;
  auto run = [&](Device device) {
    manual_seed(3);
    auto model = std::make_shared<charlm::CharLM>(config);
    model->to(device);
    auto [decay, no_decay] = charlm::decay_groups(*model);
    optim::AdamW opt(decay, optim::AdamWOptions(1e-2));
    opt.add_param_group(no_decay, optim::AdamWOptions(1e-2).weight_decay(0.0));
    std::vector<int64_t> xs, ys;
    for (int64_t i = 0; i < 32; ++i) xs.push_back(i * 7 % 13), ys.push_back(i * 5 % 13);
    Tensor x = tensor(xs).reshape({4, 8}).to(device), y = tensor(ys).reshape({4, 8}).to(device);
    manual_seed(11);  // dropout's generator, on every device
    std::vector<float> losses;
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(model->forward(x).reshape({-1, 13}), y.reshape({-1}));
      loss.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      losses.push_back(loss.item<float>());
    }
    manual_seed(5);
    Tensor sample = charlm::generate(*model, zeros({1, 1}, TensorOptions(kInt64).device(device)), 12, 0.9, 5);
    return std::make_pair(losses, sample.cpu().to_vector<int64_t>());
  };
  const auto [cpu_losses, cpu_sample] = run(Device(kCPU));
  const auto [cuda_losses, cuda_sample] = run(Device("cuda:0"));
  backends::cuda::matmul.allow_tf32 = saved_tf32;
  ASSERT_EQ(cpu_losses.size(), cuda_losses.size());
  for (size_t i = 0; i < cpu_losses.size(); ++i) EXPECT_NEAR(cuda_losses[i], cpu_losses[i], 1e-5) << "step " << i;
  EXPECT_LT(cpu_losses.back(), cpu_losses.front());
  EXPECT_EQ(cuda_sample, cpu_sample);
}

TEST(TransformerModules, ConstructorsCheckTheirArguments) {
  EXPECT_THROW_MSG(nn::MultiheadAttention(10, 3), ValueError, "embed_dim must be divisible by num_heads");
  EXPECT_THROW_MSG(nn::MultiheadAttention(8, 0), ValueError, "embed_dim and num_heads must be greater than 0");
  EXPECT_THROW_MSG(nn::MultiheadAttention(8, 2, 1.5), ValueError, "dropout probability has to be between 0 and 1");
  nn::MultiheadAttention no_bias(8, 2, 0.0, /*bias=*/false);
  EXPECT_EQ(no_bias.named_parameters().keys(), (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
}

TEST(TransformerModules, EncoderLayerChecksItsActivationAndClones) {
  EXPECT_THROW_MSG(nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"), ValueError,
                   "activation should be relu/gelu, not tanh");
  EXPECT_THROW_MSG(nn::TransformerEncoderLayer(10, 3), ValueError, "embed_dim must be divisible by num_heads");
  nn::TransformerEncoderLayer layer(8, 2, 16, 0.1, "gelu", 1e-5, true, true);
  auto copy = std::dynamic_pointer_cast<nn::TransformerEncoderLayer>(layer.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(copy->norm_first);
  EXPECT_EQ(copy->activation, "gelu");
  EXPECT_TRUE(copy->linear1->weight.equal(layer.linear1->weight));
  EXPECT_FALSE(copy->linear1->weight.is_same(layer.linear1->weight));
  layer.eval();
  copy->eval();
  Tensor x = randn({2, 3, 8});
  EXPECT_TRUE(copy->forward(x).allclose(layer.forward(x)));
}

TEST(TransformerModules, EmbeddingLayerNormAndGeluAreTorchs) {
  nn::Embedding e(10, 3, /*padding_idx=*/-1);
  EXPECT_EQ(e.padding_idx, 9);
  EXPECT_EQ(e.repr(), "Embedding(10, 3, padding_idx=9)");
  EXPECT_TRUE(e.weight.select(0, 9).equal(zeros({3})));
  EXPECT_EQ(e.forward(tensor({{1, 9}}, kInt64)).sizes(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_THROW_MSG(nn::Embedding(10, 3, 10), ValueError, "Padding_idx must be within num_embeddings");
  EXPECT_THROW_MSG(e.forward(tensor({0, 10}, kInt64)), IndexError, "index out of range in self");
  EXPECT_THROW_MSG(e.forward(tensor({-11}, kInt64)), IndexError, "index out of range in self");
  nn::LayerNorm ln(std::vector<int64_t>{8});
  EXPECT_EQ(ln.repr(), "LayerNorm((8,), eps=1e-05, elementwise_affine=True)");
  EXPECT_TRUE(ln.weight.equal(ones({8})) && ln.bias.equal(zeros({8})));
  EXPECT_THROW(ln.forward(zeros({2, 7})), ValueError);
  nn::LayerNorm plain(std::vector<int64_t>{2, 3}, 1e-6, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.named_parameters().empty());
  Tensor y = plain.forward(tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}));
  EXPECT_NEAR(y.mean().item<float>(), 0.0f, 1e-6);
  nn::GELU gelu("tanh");
  EXPECT_EQ(gelu.repr(), "GELU(approximate='tanh')");
  EXPECT_THROW_MSG(nn::GELU("fast"), ValueError, "approximate argument must be either none or tanh.");
  // torch.nn.GELU()(torch.tensor([-1., 0., 2.])) = [-0.1587, 0, 1.9545]
  EXPECT_TRUE(nn::GELU().forward(tensor({-1.0f, 0.0f, 2.0f})).allclose(tensor({-0.15865525f, 0.0f, 1.9544997f})));
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
  EXPECT_TRUE(copy->out_proj->weight.equal(m.out_proj->weight));
  EXPECT_FALSE(copy->out_proj->weight.is_same(m.out_proj->weight));
}

}  // namespace
}  // namespace ember::testing
