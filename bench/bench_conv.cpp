// The convolution family on the cpu, forward + backward (input and weight gradients), with
// LibTorch (CPU) timed side by side in the same run: conv1d, conv3d and conv_transpose2d at
// a typical layer's size. The summary gives the ratio ember / torch (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

namespace F = ember::nn::functional;

// Forward, then the gradients of sum(out) with respect to the input and the weight.
template <typename Conv>
void ember_forward_backward(benchmark::State& state, const ember::IntList& input, const ember::IntList& weight,
                            Conv conv) {
  auto x = ember::randn(input).requires_grad_(), w = ember::randn(weight).requires_grad_();
  for (auto _ : state) benchmark::DoNotOptimize(ember::autograd::grad({conv(x, w).sum()}, {x, w}));
}

void ember_conv1d_16x32x256_k5(benchmark::State& state) {
  ember_forward_backward(state, {16, 32, 256}, {64, 32, 5},
                         [](auto& x, auto& w) { return F::conv1d(x, w, {}, {1}, {2}); });
}
void ember_conv3d_4x8x16x16x16_k3(benchmark::State& state) {
  ember_forward_backward(state, {4, 8, 16, 16, 16}, {16, 8, 3, 3, 3},
                         [](auto& x, auto& w) { return F::conv3d(x, w, {}, {1}, {1}); });
}
void ember_conv_transpose2d_16x32x16x16_k4s2(benchmark::State& state) {
  ember_forward_backward(state, {16, 32, 16, 16}, {32, 16, 4, 4},
                         [](auto& x, auto& w) { return F::conv_transpose2d(x, w, {}, {2}, {1}); });
}

#if EMBER_BENCH_WITH_TORCH
template <typename Conv>
void torch_forward_backward(benchmark::State& state, std::vector<int64_t> input, std::vector<int64_t> weight,
                            Conv conv) {
  auto x = torch::randn(input).requires_grad_(), w = torch::randn(weight).requires_grad_();
  for (auto _ : state) benchmark::DoNotOptimize(torch::autograd::grad({conv(x, w).sum()}, {x, w}));
}

void torch_conv1d_16x32x256_k5(benchmark::State& state) {
  torch_forward_backward(state, {16, 32, 256}, {64, 32, 5},
                         [](auto& x, auto& w) { return torch::conv1d(x, w, {}, 1, 2); });
}
void torch_conv3d_4x8x16x16x16_k3(benchmark::State& state) {
  torch_forward_backward(state, {4, 8, 16, 16, 16}, {16, 8, 3, 3, 3},
                         [](auto& x, auto& w) { return torch::conv3d(x, w, {}, 1, 1); });
}
void torch_conv_transpose2d_16x32x16x16_k4s2(benchmark::State& state) {
  torch_forward_backward(state, {16, 32, 16, 16}, {32, 16, 4, 4},
                         [](auto& x, auto& w) { return torch::conv_transpose2d(x, w, {}, 2, 1); });
}
#endif

}  // namespace

BENCHMARK(ember_conv1d_16x32x256_k5)->UseRealTime();
BENCHMARK(ember_conv3d_4x8x16x16x16_k3)->UseRealTime();
BENCHMARK(ember_conv_transpose2d_16x32x16x16_k4s2)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_conv1d_16x32x256_k5)->UseRealTime();
BENCHMARK(torch_conv3d_4x8x16x16x16_k3)->UseRealTime();
BENCHMARK(torch_conv_transpose2d_16x32x16x16_k4s2)->UseRealTime();
#endif

EMBER_PEER_BENCHMARK_MAIN()
