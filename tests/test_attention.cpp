// F::scaled_dot_product_attention (the math path): values and gradients against PyTorch's
// math (transformer_ops_expected.py; PyTorch 1.13), causal, bool and float masks, scale,
// dropout, float64 gradcheck, non-contiguous inputs, errors, cuda devices against the cpu.
#include <limits>

#include "transformer_test_util.h"

using namespace ember;
using ember::testing::expect_case;
using ember::testing::expect_gradcheck;
using ember::testing::seq;
namespace E = transformer_expected;
namespace F = ember::nn::functional;

namespace {

using Ts = std::vector<Tensor>;
const std::vector<std::pair<IntList, double>> kQkv = {{{2, 2, 3, 4}, 0.1}, {{2, 2, 5, 4}, 0.2}, {{2, 2, 5, 3}, 0.3}};

class Attention : public ember::testing::OnDevice {
 protected:
  Tensor R(const IntList& s, double c) { return seq(s, c, dev_).requires_grad_(true); }
};

TEST_P(Attention, ValuesAndGradsMatchPyTorch) {
  expect_case(
      "plain", [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2]); }, kQkv, E::kSdpaPlain,
      dev_);
  expect_case(
      "causal", [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); }, kQkv,
      E::kSdpaCausal, dev_);
  Tensor bool_mask = seq({3, 5}, 0.7, dev_).gt(-0.5);
  expect_case(
      "bool mask", [&](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], bool_mask); }, kQkv,
      E::kSdpaBoolMask, dev_);
  Tensor float_mask = seq({1, 3, 5}, 0.9, dev_);
  expect_case(
      "float mask", [&](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], float_mask); }, kQkv,
      E::kSdpaFloatMask, dev_);
  expect_case(
      "scale", [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, false, 0.3); }, kQkv,
      E::kSdpaScale, dev_);
}

TEST_P(Attention, CausalEqualsItsBoolMask) {
  Tensor q = seq({2, 4, 3}, 0.1, dev_), k = seq({2, 4, 3}, 0.2, dev_), v = seq({2, 4, 2}, 0.3, dev_);
  std::vector<uint8_t> lower;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) lower.push_back(j <= i);
  Tensor mask = tensor(TensorData(lower)).reshape({4, 4}).to(kBool).to(dev_);
  EXPECT_TRUE(allclose(F::scaled_dot_product_attention(q, k, v, {}, 0.0, true),
                       F::scaled_dot_product_attention(q, k, v, mask), 1e-12, 1e-12));
  // The first query sees only the first key: its output is the first value.
  Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  EXPECT_TRUE(allclose(out.select(1, 0), v.select(1, 0), 1e-12, 1e-12));
}

TEST_P(Attention, Gradcheck) {
  auto sdpa = [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2]); };
  expect_gradcheck("sdpa", sdpa, {R({2, 3, 2}, 0.1), R({2, 4, 2}, 0.2), R({2, 4, 3}, 0.3)});
  expect_gradcheck("sdpa causal",
                   [](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); },
                   {R({1, 2, 3, 2}, 0.1), R({1, 2, 3, 2}, 0.2), R({1, 2, 3, 2}, 0.3)});
  Tensor mask = seq({3, 4}, 0.4, dev_);
  expect_gradcheck("sdpa float mask",
                   [mask](const Ts& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], mask); },
                   {R({3, 2}, 0.1), R({4, 2}, 0.2), R({4, 2}, 0.3)});
}

TEST_P(Attention, NonContiguousInputs) {
  // [B, L, H, E] transposed to [B, H, L, E], as multi-head attention makes them.
  Tensor q = seq({2, 3, 2, 4}, 0.1, dev_).transpose(1, 2), k = seq({2, 5, 2, 4}, 0.2, dev_).transpose(1, 2);
  Tensor v = seq({2, 5, 2, 3}, 0.3, dev_).transpose(1, 2);
  EXPECT_TRUE(allclose(F::scaled_dot_product_attention(q, k, v, {}, 0.0, true),
                       F::scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), {}, 0.0, true),
                       1e-12, 1e-12));
}

TEST_P(Attention, Dropout) {
  Tensor q = seq({2, 3, 4}, 0.1, dev_), k = seq({2, 5, 4}, 0.2, dev_), v = seq({2, 5, 3}, 0.3, dev_);
  manual_seed(11);
  Tensor a = F::scaled_dot_product_attention(q, k, v, {}, 0.5);
  manual_seed(11);
  Tensor b = F::scaled_dot_product_attention(q, k, v, {}, 0.5);
  EXPECT_TRUE(equal(a, b));  // the default generator's stream
  EXPECT_FALSE(allclose(a, F::scaled_dot_product_attention(q, k, v), 1e-6, 1e-6));
  // dropout 1 drops every weight.
  EXPECT_EQ(F::scaled_dot_product_attention(q, k, v, {}, 1.0).abs().sum().item<double>(), 0.0);
}

TEST_P(Attention, Errors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor q = ones({2, 3, 4}, o), k = ones({2, 5, 4}, o), v = ones({2, 5, 3}, o);
  EXPECT_THROW_MSG(F::scaled_dot_product_attention(q, k, v, ones({3, 5}, o).gt(0), 0.0, true), ValueError,
                   "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  EXPECT_THROW_MSG(F::scaled_dot_product_attention(q, ones({2, 5, 3}, o), v), ValueError,
                   "query and key must have the same embedding dim");
  EXPECT_THROW_MSG(F::scaled_dot_product_attention(q, k, ones({2, 4, 3}, o)), ValueError,
                   "key and value must have the same sequence length");
  EXPECT_THROW_MSG(F::scaled_dot_product_attention(q, k, v, ones({3, 4}, o)), ValueError,
                   "attn_mask of shape [3, 4] does not broadcast to the attention weights' shape [2, 3, 5]");
  EXPECT_THROW_MSG(F::scaled_dot_product_attention(q, k, v, ones({3, 5}, TensorOptions(kInt64).device(dev_))),
                   TypeError, "Expected attn_mask dtype to be bool or to match query dtype");
  EXPECT_THROW(F::scaled_dot_product_attention(q, k, ones({2, 5, 3}, TensorOptions(kFloat64).device(dev_))), TypeError);
}

EMBER_ON_DEVICES(Attention, "cpu", "cuda:0");

TEST(AttentionDevices, CudaEqualsCpu) {
  EMBER_REQUIRE_DEVICES(1);
  backends::cuda::matmul.allow_tf32 = false;
  auto run = [](Device dev) {
    Tensor q = seq({2, 2, 6, 8}, 0.1, dev, kFloat32).requires_grad_(true);
    Tensor k = seq({2, 2, 6, 8}, 0.2, dev, kFloat32).requires_grad_(true);
    Tensor v = seq({2, 2, 6, 8}, 0.3, dev, kFloat32).requires_grad_(true);
    Tensor out = F::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    (out * seq({2, 2, 6, 8}, 0.5, dev, kFloat32)).sum().backward();
    return Ts{out.detach().to(Device(kCPU)), q.grad().to(Device(kCPU)), k.grad().to(Device(kCPU)),
              v.grad().to(Device(kCPU))};
  };
  Ts cpu = run(Device(kCPU)), cuda = run(Device("cuda:0"));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(allclose(cpu[i], cuda[i], 1e-5, 1e-6)) << i;
}

}  // namespace
