// The names of ../shared/api-next.md, spelled as the contract spells them, on an emulated
// device: every call compiles against <ember/ember.h> alone and does what its line says.
// (Values against PyTorch are in each feature's own tests; this file guards the names.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "ember/ember.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool configured = (ember::cuda::emulate(1, 512 * MiB), true);

using namespace ember;
namespace F = ember::nn::functional;

TEST(ApiNextContract, Operations) {
  ASSERT_TRUE(configured);
  const Device dev(kCUDA, 0);
  Tensor x = arange(12, TensorOptions().dtype(kFloat32).device(dev)).reshape({3, 4});
  Tensor index = tensor({0, 2}, TensorOptions().dtype(kInt64).device(dev));
  Tensor source = ones({2, 4}, dev);
  Tensor y = x.clone();
  y.index_add_(0, index, source);
  EXPECT_EQ(x.index_add(0, index, source).sum().item<float>(), x.sum().item<float>() + 8);
  EXPECT_TRUE(y.equal(x.index_add(0, index, source)));
  Tensor idx = zeros({3, 4}, TensorOptions().dtype(kInt64).device(dev));
  Tensor z = zeros({3, 4}, dev);
  z.scatter_add_(1, idx, x);
  EXPECT_FLOAT_EQ(z.select(1, 0).sum().item<float>(), x.sum().item<float>());
  EXPECT_TRUE(x.gather(1, idx).equal(ember::gather(x, 1, idx)));
  EXPECT_TRUE(ember::triu(x, 0).equal(x.triu(0)));
  EXPECT_TRUE(ember::tril(x, 0).equal(x.tril(0)));
  EXPECT_EQ(ember::triu(x, 1).select(0, 2).sum().item<float>(), 11.0f);
  Tensor b1 = ones({2, 3, 4}, dev), b2 = ones({2, 4, 5}, dev);
  EXPECT_EQ(ember::baddbmm(zeros({2, 3, 5}, dev), b1, b2, /*beta=*/1.0, /*alpha=*/1.0).sizes(), (IntList{2, 3, 5}));
  EXPECT_EQ(ember::matmul(ones({2, 1, 3, 4}, dev), ones({5, 4, 6}, dev)).sizes(), (IntList{2, 5, 3, 6}));
  auto [values, indices] = x.topk(2, /*dim=*/-1, /*largest=*/true, /*sorted=*/true);
  EXPECT_EQ(values.select(0, 0).select(0, 0).item<float>(), 3.0f);
  EXPECT_EQ(indices.select(0, 0).select(0, 1).item<int64_t>(), 2);
  auto [sorted, order] = x.neg().sort(/*dim=*/-1, /*descending=*/false);
  EXPECT_EQ(sorted.select(0, 0).select(0, 0).item<float>(), -3.0f);
  EXPECT_EQ(order.select(0, 0).select(0, 0).item<int64_t>(), 3);
  Tensor probs = tensor({0.0, 1.0, 0.0}, TensorOptions().device(dev));
  EXPECT_EQ(ember::multinomial(probs, 1, /*replacement=*/false).item<int64_t>(), 1);
  EXPECT_EQ(x.cumsum(1).select(1, 3).select(0, 0).item<float>(), 6.0f);
  EXPECT_NEAR(x.logsumexp({1}, /*keepdim=*/false).select(0, 0).item<float>(), 3.4401897f, 1e-5);
  EXPECT_NEAR(x.var({1}, /*correction=*/1, /*keepdim=*/false).select(0, 0).item<float>(), 1.6666666f, 1e-5);
  EXPECT_NEAR(x.std({1}, 1, false).select(0, 0).item<float>(), 1.2909944f, 1e-5);
  EXPECT_NEAR((x + 1).rsqrt().select(0, 2).select(0, 3).item<float>(), 1.0f / std::sqrt(12.0f), 1e-6);
  EXPECT_NEAR(x.tanh().select(0, 0).select(0, 1).item<float>(), std::tanh(1.0f), 1e-6);
  EXPECT_NEAR(x.erf().select(0, 0).select(0, 1).item<float>(), std::erf(1.0f), 1e-6);
  Tensor weight = arange(10, TensorOptions().dtype(kFloat32).device(dev)).reshape({5, 2});
  Tensor tokens = tensor({4, 0}, TensorOptions().dtype(kInt64).device(dev));
  EXPECT_EQ(F::embedding(tokens, weight, /*padding_idx=*/std::nullopt).select(0, 0).select(0, 1).item<float>(), 9.0f);
  Tensor h = F::layer_norm(x, /*normalized_shape=*/{4}, Tensor(), Tensor(), /*eps=*/1e-5);
  EXPECT_NEAR(h.select(0, 1).sum().item<float>(), 0.0f, 1e-5);
  EXPECT_NEAR(F::gelu(x, /*approximate=*/"none").select(0, 0).select(0, 1).item<float>(), 0.8413447f, 1e-6);
  EXPECT_NEAR(F::gelu(x, "tanh").select(0, 0).select(0, 1).item<float>(), 0.8411920f, 1e-6);
  Tensor q = ones({1, 2, 3, 4}, dev);
  Tensor a = F::scaled_dot_product_attention(q, q, x.reshape({1, 1, 3, 4}).expand({1, 2, 3, 4}), /*attn_mask=*/{},
                                             /*dropout_p=*/0.0, /*is_causal=*/true, /*scale=*/std::nullopt);
  EXPECT_EQ(a.select(1, 0).select(1, 0).select(1, 0).item<float>(), 0.0f);  // the first query sees the first key only
}

TEST(ApiNextContract, ModulesAndUtilities) {
  ASSERT_TRUE(configured);
  nn::Embedding embedding(10, 8, /*padding_idx=*/std::nullopt);
  nn::LayerNorm norm(std::vector<int64_t>{8}, /*eps=*/1e-5, /*elementwise_affine=*/true);
  nn::GELU gelu(/*approximate=*/"none");
  nn::MultiheadAttention attention(8, 2, /*dropout=*/0.0, /*bias=*/true, /*batch_first=*/true);
  nn::TransformerEncoderLayer layer(8, 2, /*dim_feedforward=*/16, /*dropout=*/0.0, /*activation=*/"gelu",
                                    /*layer_norm_eps=*/1e-5, /*batch_first=*/true, /*norm_first=*/true);
  EXPECT_EQ(embedding.weight.sizes(), (IntList{10, 8}));
  Tensor tokens = tensor({1, 2, 3}, TensorOptions().dtype(kInt64)).reshape({1, 3});
  Tensor h = gelu.forward(norm.forward(embedding.forward(tokens)));
  auto [out, weights] = attention.forward(h, h, h, /*key_padding_mask=*/{}, /*need_weights=*/true);
  EXPECT_EQ(out.sizes(), (IntList{1, 3, 8}));
  EXPECT_EQ(weights.sizes(), (IntList{1, 3, 3}));
  EXPECT_EQ(layer.forward(h).sizes(), (IntList{1, 3, 8}));
  auto named = layer.named_parameters();
  for (const char* key : {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                          "linear1.weight", "linear2.bias", "norm1.weight", "norm2.bias"})
    EXPECT_TRUE(named.contains(key)) << key;
  nn::ModuleDict dict;
  dict.insert("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{8}));
  EXPECT_TRUE(dict.contains("norm"));
  EXPECT_EQ(dict.keys(), std::vector<std::string>{"norm"});
  EXPECT_NE(dict["norm"], nullptr);
  layer.forward(h).sum().backward();
  Tensor total = nn::utils::clip_grad_norm_(layer.parameters(), /*max_norm=*/1e-3, /*norm_type=*/2.0,
                                            /*error_if_nonfinite=*/false);
  EXPECT_GT(total.item<float>(), 1e-3f);
  nn::utils::clip_grad_value_(layer.parameters(), 1e-4);
  for (const Tensor& p : layer.parameters()) {
    if (p.grad().defined()) {
      EXPECT_LE(p.grad().abs().max().item<float>(), 1e-4f);
    }
  }
}

TEST(ApiNextContract, Schedulers) {
  std::vector<Tensor> params{zeros({2}).requires_grad_(true)};
  optim::SGD sgd(params, optim::SGDOptions(1.0));
  auto warmup = std::make_shared<optim::LinearLR>(sgd, /*start_factor=*/0.5, /*end_factor=*/1.0, /*total_iters=*/2);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(sgd, /*T_max=*/4, /*eta_min=*/0.0);
  optim::SequentialLR schedule(sgd, {warmup, cosine}, /*milestones=*/{2});
  EXPECT_DOUBLE_EQ(schedule.get_last_lr().at(0), 0.5);
  for (int i = 0; i < 3; ++i) schedule.step();
  EXPECT_EQ(schedule.last_epoch(), 3);
  EXPECT_FALSE(schedule.state_dict().empty());
}

TEST(ApiNextContract, CudaGraphs) {
  ASSERT_TRUE(configured);
  const Device dev(kCUDA, 0);
  Tensor static_in = zeros({4}, dev);
  cuda::Stream side(0);  // capture is on a non-default stream
  Tensor static_out;
  cuda::CUDAGraph g;
  {
    cuda::StreamGuard guard(side);
    EXPECT_FALSE(cuda::is_current_stream_capturing());
    g.capture_begin(/*pool=*/{}, /*capture_error_mode=*/"global");
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    static_out = static_in * 2 + 1;
    g.capture_end();
  }
  static_in.copy_(arange(4, TensorOptions().dtype(kFloat32).device(dev)));
  g.replay();
  EXPECT_EQ(static_out.sum().item<float>(), 16.0f);
  cuda::MempoolId pool = g.pool();
  cuda::MempoolId shared = cuda::graph_pool_handle();
  EXPECT_FALSE(pool == shared);
  cuda::CUDAGraph g2;
  Tensor out2;
  {
    cuda::graph capture(g2);
    out2 = static_in + 1;
  }
  g2.replay();
  EXPECT_EQ(out2.sum().item<float>(), 10.0f);
  g.reset();
  EXPECT_THROW(g.replay(), CudaError);
  optim::AdamOptions options = optim::AdamOptions(1e-3).capturable(true);
  EXPECT_TRUE(options.capturable());
  EXPECT_TRUE(optim::SGDOptions(0.1).capturable(true).capturable());
  EXPECT_TRUE(optim::AdamWOptions(1e-3).capturable(true).capturable());
  auto linear = std::make_shared<nn::Linear>(4, 2);
  linear->to(dev);
  std::shared_ptr<nn::Module> graphed = cuda::make_graphed_callables(linear, {zeros({3, 4}, dev).requires_grad_(true)});
  EXPECT_NE(graphed, nullptr);
}

TEST(ApiNextContract, AllocatorBackendName) {
  ASSERT_TRUE(configured);
  EXPECT_EQ(cuda::get_allocator_backend(), "native");
}

// ../shared/api-cuda-note-2x.md's spellings (memory pools, settings, workspaces, precision
// flags, graphs with generators and several callables), as the contract writes them.
TEST(ApiCudaNote2xContract, NamesAsWritten) {
  ASSERT_TRUE(configured);
  ember::cuda::MemPool pool;
  {
    ember::cuda::use_mem_pool guard(pool /*, device = current */);
    auto t = ember::empty({1 << 20}, "cuda");
    EXPECT_EQ(pool.use_count(), 2);
  }
  ember::cuda::MempoolId id = pool.id();
  int64_t n = pool.use_count();
  std::string s = pool.snapshot();
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(s.empty());
  EXPECT_NE(id, ember::cuda::MempoolId{});
  ember::cuda::memory::set_allocator_settings("expandable_segments:False");
  ember::cuda::clear_cublas_workspaces();

  ember::backends::cuda::matmul.allow_fp16_reduced_precision_reduction = true;
  ember::backends::cuda::matmul.allow_bf16_reduced_precision_reduction = true;
  ember::backends::cuda::matmul.allow_fp16_accumulation = false;
  ember::backends::fp32_precision = "ieee";
  ember::backends::cuda::matmul.fp32_precision = "tf32";
  ember::backends::cudnn.fp32_precision = "none";
  ember::backends::cudnn.conv.fp32_precision = "tf32";
  ember::backends::cudnn.rnn.fp32_precision = "ieee";
  EXPECT_TRUE(ember::backends::cuda::matmul.allow_tf32);
  ember::backends::cudnn.rnn.fp32_precision = "tf32";

  ember::Generator gen(ember::Device("cuda:0"));
  ember::cuda::CUDAGraph g;
  g.register_generator_state(gen);
  auto state = gen.graphsafe_get_state();
  gen.graphsafe_set_state(state);
  auto module_a = std::make_shared<ember::nn::Linear>(4, 4);
  auto module_b = std::make_shared<ember::nn::Linear>(4, 4);
  module_a->to("cuda:0");
  module_b->to("cuda:0");
  Tensor sample_a = zeros({2, 4}, "cuda:0"), sample_b1 = zeros({2, 4}, "cuda:0");
  auto graphed = ember::cuda::make_graphed_callables({module_a, module_b}, {{sample_a}, {sample_b1}});
  EXPECT_EQ(graphed.size(), 2u);
}

}  // namespace
