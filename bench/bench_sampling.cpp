// Grid sampling on the cpu with LibTorch (CPU) timed side by side in the same run:
// grid_sample forward + backward (input and grid gradients; N=8, C=16, 64x64, bilinear, zeros)
// and affine_grid forward (N=8, 64x64 and 5-D 16^3). The summary gives the ratio ember / torch
// (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

namespace F = ember::nn::functional;

void ember_grid_sample_8x16x64x64_fwd_bwd(benchmark::State& state) {
  auto x = ember::randn({8, 16, 64, 64}).requires_grad_();
  auto grid = (ember::rand({8, 64, 64, 2}) * 2.2 - 1.1).requires_grad_();
  for (auto _ : state) {
    auto y = F::grid_sample(x, grid, "bilinear", "zeros", false);
    benchmark::DoNotOptimize(ember::autograd::grad({y.sum()}, {x, grid}));
  }
}
void ember_affine_grid_8x64x64(benchmark::State& state) {
  auto theta = ember::randn({8, 2, 3});
  for (auto _ : state) benchmark::DoNotOptimize(F::affine_grid(theta, {8, 16, 64, 64}, false));
}
void ember_affine_grid_8x16x16x16(benchmark::State& state) {
  auto theta = ember::randn({8, 3, 4});
  for (auto _ : state) benchmark::DoNotOptimize(F::affine_grid(theta, {8, 16, 16, 16, 16}, false));
}

#if EMBER_BENCH_WITH_TORCH
void torch_grid_sample_8x16x64x64_fwd_bwd(benchmark::State& state) {
  auto x = torch::randn({8, 16, 64, 64}).requires_grad_();
  auto grid = (torch::rand({8, 64, 64, 2}) * 2.2 - 1.1).requires_grad_();
  for (auto _ : state) {
    auto y = torch::grid_sampler(x, grid, 0, 0, false);
    benchmark::DoNotOptimize(torch::autograd::grad({y.sum()}, {x, grid}));
  }
}
void torch_affine_grid_8x64x64(benchmark::State& state) {
  auto theta = torch::randn({8, 2, 3});
  for (auto _ : state) benchmark::DoNotOptimize(torch::affine_grid_generator(theta, {8, 16, 64, 64}, false));
}
void torch_affine_grid_8x16x16x16(benchmark::State& state) {
  auto theta = torch::randn({8, 3, 4});
  for (auto _ : state) benchmark::DoNotOptimize(torch::affine_grid_generator(theta, {8, 16, 16, 16, 16}, false));
}
#endif

}  // namespace

BENCHMARK(ember_grid_sample_8x16x64x64_fwd_bwd)->UseRealTime();
BENCHMARK(ember_affine_grid_8x64x64)->UseRealTime();
BENCHMARK(ember_affine_grid_8x16x16x16)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_grid_sample_8x16x64x64_fwd_bwd)->UseRealTime();
BENCHMARK(torch_affine_grid_8x64x64)->UseRealTime();
BENCHMARK(torch_affine_grid_8x16x16x16)->UseRealTime();
#endif

EMBER_PEER_BENCHMARK_MAIN()
