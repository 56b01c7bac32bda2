// The transformer ops on the CPU, forward and backward, with LibTorch (CPU) timed side by
// side in the same run: batched and broadcast matmul, layer_norm, gelu, embedding and
// scaled_dot_product_attention at a small GPT's sizes (batch 8, context 128, width 128,
// 4 heads of 32); each backward starts from a dense gradient. The summary gives the ratio ember / torch (below 1: ember
// is faster).
#include <benchmark/benchmark.h>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

namespace F = ember::nn::functional;

// [8, 4, 128, 32] @ [8, 4, 32, 128]: attention's scores.
void ember_matmul_4d(benchmark::State& state) {
  auto q = ember::randn({8, 4, 128, 32}), k = ember::randn({8, 4, 32, 128});
  for (auto _ : state) benchmark::DoNotOptimize(ember::matmul(q, k));
}

// [8, 128, 128] @ [128, 512]: a bias-free projection, batch dims folded into rows.
void ember_matmul_3d_by_2d(benchmark::State& state) {
  auto x = ember::randn({8, 128, 128}), w = ember::randn({128, 512});
  for (auto _ : state) benchmark::DoNotOptimize(ember::matmul(x, w));
}

void ember_layer_norm_fwd_bwd(benchmark::State& state) {
  auto x = ember::randn({8, 128, 128}, ember::TensorOptions().requires_grad(true));
  auto w = ember::ones({128}, ember::TensorOptions().requires_grad(true));
  auto b = ember::zeros({128}, ember::TensorOptions().requires_grad(true));
  auto gy = ember::randn({8, 128, 128});
  for (auto _ : state) F::layer_norm(x, {128}, w, b).backward(gy);
}

void ember_gelu_fwd_bwd(benchmark::State& state) {
  auto x = ember::randn({8, 128, 512}, ember::TensorOptions().requires_grad(true));
  auto gy = ember::randn({8, 128, 512});
  for (auto _ : state) F::gelu(x).backward(gy);
}

void ember_embedding_fwd_bwd(benchmark::State& state) {
  auto w = ember::randn({96, 128}, ember::TensorOptions().requires_grad(true));
  auto idx = (ember::rand({8, 128}) * 96).to(ember::kInt64);
  auto gy = ember::randn({8, 128, 128});
  for (auto _ : state) F::embedding(idx, w).backward(gy);
}

void ember_sdpa_causal_fwd_bwd(benchmark::State& state) {
  auto opts = ember::TensorOptions().requires_grad(true);
  auto q = ember::randn({8, 4, 128, 32}, opts), k = ember::randn({8, 4, 128, 32}, opts);
  auto v = ember::randn({8, 4, 128, 32}, opts);
  auto gy = ember::randn({8, 4, 128, 32});
  for (auto _ : state) F::scaled_dot_product_attention(q, k, v, {}, 0.0, true).backward(gy);
}

#if EMBER_BENCH_WITH_TORCH
namespace TF = torch::nn::functional;

void torch_matmul_4d(benchmark::State& state) {
  auto q = torch::randn({8, 4, 128, 32}), k = torch::randn({8, 4, 32, 128});
  for (auto _ : state) benchmark::DoNotOptimize(torch::matmul(q, k));
}

void torch_matmul_3d_by_2d(benchmark::State& state) {
  auto x = torch::randn({8, 128, 128}), w = torch::randn({128, 512});
  for (auto _ : state) benchmark::DoNotOptimize(torch::matmul(x, w));
}

void torch_layer_norm_fwd_bwd(benchmark::State& state) {
  auto x = torch::randn({8, 128, 128}, torch::requires_grad());
  auto w = torch::ones({128}, torch::requires_grad()), b = torch::zeros({128}, torch::requires_grad());
  auto gy = torch::randn({8, 128, 128});
  for (auto _ : state) torch::layer_norm(x, {128}, w, b).backward(gy);
}

void torch_gelu_fwd_bwd(benchmark::State& state) {
  auto x = torch::randn({8, 128, 512}, torch::requires_grad());
  auto gy = torch::randn({8, 128, 512});
  for (auto _ : state) torch::gelu(x).backward(gy);
}

void torch_embedding_fwd_bwd(benchmark::State& state) {
  auto w = torch::randn({96, 128}, torch::requires_grad());
  auto idx = (torch::rand({8, 128}) * 96).to(torch::kLong);
  auto gy = torch::randn({8, 128, 128});
  for (auto _ : state) torch::embedding(w, idx).backward(gy);
}

// PyTorch 1.13's math path by hand (its sdpa is private and differs in is_causal).
void torch_sdpa_causal_fwd_bwd(benchmark::State& state) {
  auto q = torch::randn({8, 4, 128, 32}, torch::requires_grad()),
       k = torch::randn({8, 4, 128, 32}, torch::requires_grad());
  auto v = torch::randn({8, 4, 128, 32}, torch::requires_grad());
  auto keep = torch::ones({128, 128}, torch::kBool).tril();
  auto gy = torch::randn({8, 4, 128, 32});
  for (auto _ : state) {
    auto weights = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(32.0));
    weights = weights.masked_fill(keep.logical_not(), -INFINITY).softmax(-1);
    torch::matmul(weights, v).backward(gy);
  }
}
#endif

}  // namespace

BENCHMARK(ember_matmul_4d)->UseRealTime();
BENCHMARK(ember_matmul_3d_by_2d)->UseRealTime();
BENCHMARK(ember_layer_norm_fwd_bwd)->UseRealTime();
BENCHMARK(ember_gelu_fwd_bwd)->UseRealTime();
BENCHMARK(ember_embedding_fwd_bwd)->UseRealTime();
BENCHMARK(ember_sdpa_causal_fwd_bwd)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_matmul_4d)->UseRealTime();
BENCHMARK(torch_matmul_3d_by_2d)->UseRealTime();
BENCHMARK(torch_layer_norm_fwd_bwd)->UseRealTime();
BENCHMARK(torch_gelu_fwd_bwd)->UseRealTime();
BENCHMARK(torch_embedding_fwd_bwd)->UseRealTime();
BENCHMARK(torch_sdpa_causal_fwd_bwd)->UseRealTime();
#endif

EMBER_PEER_BENCHMARK_MAIN()
