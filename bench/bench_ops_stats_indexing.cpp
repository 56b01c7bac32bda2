// The transformer workload's sampling, statistics and indexing ops on the cpu through the
// public API, with LibTorch (CPU) timed side by side in the same run: each ember benchmark
// has a torch twin, and the summary gives the ratio ember / torch (below 1: ember is faster).
// Shapes are a character model's: 32 rows of 128 logits (sampling), 64 x 1024 activations;
// the sums are a linear layer's bias gradient over 8192 rows of 512 and a convolution's over
// (batch, positions) of a 64 x 32 x 28 x 28 output gradient.
#include <benchmark/benchmark.h>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

void ember_topk_32x128_k10(benchmark::State& state) {
  auto x = ember::randn({32, 128});
  for (auto _ : state) benchmark::DoNotOptimize(x.topk(10));
}
void ember_sort_64x1024(benchmark::State& state) {
  auto x = ember::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.sort(1));
}
void ember_multinomial_32x128(benchmark::State& state) {
  auto p = ember::softmax(ember::randn({32, 128}), 1);
  for (auto _ : state) benchmark::DoNotOptimize(ember::multinomial(p, 1));
}
void ember_cumsum_64x1024(benchmark::State& state) {
  auto x = ember::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.cumsum(1));
}
void ember_logsumexp_64x1024(benchmark::State& state) {
  auto x = ember::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.logsumexp({1}));
}
void ember_var_64x1024(benchmark::State& state) {
  auto x = ember::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.var({1}));
}
void ember_sum_rows_8192x512(benchmark::State& state) {
  auto x = ember::randn({8192, 512});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum(0));
}
void ember_sum_dims_64x32x28x28(benchmark::State& state) {
  auto x = ember::randn({64, 32, 28, 28});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({0, 2, 3}));
}
void ember_gather_64x1024(benchmark::State& state) {
  auto x = ember::randn({64, 1024});
  auto index = (ember::rand({64, 1024}) * 1024).to(ember::kInt64);
  for (auto _ : state) benchmark::DoNotOptimize(x.gather(1, index));
}
void ember_scatter_add_64x1024(benchmark::State& state) {
  auto x = ember::zeros({64, 1024}), src = ember::randn({64, 1024});
  auto index = (ember::rand({64, 1024}) * 1024).to(ember::kInt64);
  for (auto _ : state) benchmark::DoNotOptimize(x.scatter_add_(1, index, src));
}
void ember_triu_128x128(benchmark::State& state) {
  auto x = ember::randn({128, 128});
  for (auto _ : state) benchmark::DoNotOptimize(x.triu(1));
}

BENCHMARK(ember_topk_32x128_k10);
BENCHMARK(ember_sort_64x1024)->UseRealTime();
BENCHMARK(ember_multinomial_32x128);
BENCHMARK(ember_cumsum_64x1024)->UseRealTime();
BENCHMARK(ember_logsumexp_64x1024)->UseRealTime();
BENCHMARK(ember_var_64x1024)->UseRealTime();
BENCHMARK(ember_sum_rows_8192x512)->UseRealTime();
BENCHMARK(ember_sum_dims_64x32x28x28)->UseRealTime();
BENCHMARK(ember_gather_64x1024)->UseRealTime();
BENCHMARK(ember_scatter_add_64x1024)->UseRealTime();
BENCHMARK(ember_triu_128x128);

#if EMBER_BENCH_WITH_TORCH
void torch_topk_32x128_k10(benchmark::State& state) {
  auto x = torch::randn({32, 128});
  for (auto _ : state) benchmark::DoNotOptimize(x.topk(10));
}
void torch_sort_64x1024(benchmark::State& state) {
  auto x = torch::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.sort(1));
}
void torch_multinomial_32x128(benchmark::State& state) {
  auto p = torch::softmax(torch::randn({32, 128}), 1);
  for (auto _ : state) benchmark::DoNotOptimize(torch::multinomial(p, 1));
}
void torch_cumsum_64x1024(benchmark::State& state) {
  auto x = torch::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.cumsum(1));
}
void torch_logsumexp_64x1024(benchmark::State& state) {
  auto x = torch::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.logsumexp({1}));
}
void torch_var_64x1024(benchmark::State& state) {
  auto x = torch::randn({64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(x.var({1}));
}
void torch_sum_rows_8192x512(benchmark::State& state) {
  auto x = torch::randn({8192, 512});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum(0));
}
void torch_sum_dims_64x32x28x28(benchmark::State& state) {
  auto x = torch::randn({64, 32, 28, 28});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({0, 2, 3}));
}
void torch_gather_64x1024(benchmark::State& state) {
  auto x = torch::randn({64, 1024});
  auto index = (torch::rand({64, 1024}) * 1024).to(torch::kLong);
  for (auto _ : state) benchmark::DoNotOptimize(x.gather(1, index));
}
void torch_scatter_add_64x1024(benchmark::State& state) {
  auto x = torch::zeros({64, 1024}), src = torch::randn({64, 1024});
  auto index = (torch::rand({64, 1024}) * 1024).to(torch::kLong);
  for (auto _ : state) benchmark::DoNotOptimize(x.scatter_add_(1, index, src));
}
void torch_triu_128x128(benchmark::State& state) {
  auto x = torch::randn({128, 128});
  for (auto _ : state) benchmark::DoNotOptimize(x.triu(1));
}

BENCHMARK(torch_topk_32x128_k10);
BENCHMARK(torch_sort_64x1024)->UseRealTime();
BENCHMARK(torch_multinomial_32x128);
BENCHMARK(torch_cumsum_64x1024)->UseRealTime();
BENCHMARK(torch_logsumexp_64x1024)->UseRealTime();
BENCHMARK(torch_var_64x1024)->UseRealTime();
BENCHMARK(torch_sum_rows_8192x512)->UseRealTime();
BENCHMARK(torch_sum_dims_64x32x28x28)->UseRealTime();
BENCHMARK(torch_gather_64x1024)->UseRealTime();
BENCHMARK(torch_scatter_add_64x1024)->UseRealTime();
BENCHMARK(torch_triu_128x128);
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  PeerRatioReporter reporter("ember / torch (real time; < 1 means ember is faster)");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
