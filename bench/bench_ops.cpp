// Op dispatch overhead and CPU throughput through the public API, with LibTorch (CPU)
// timed side by side in the same run. Each ember benchmark has a torch twin; the
// summary printed at the end gives the ratio ember / torch (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#endif

namespace {

void ember_small_add(benchmark::State& state) {
  auto a = ember::ones({16}), b = ember::ones({16});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}

void ember_large_add(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = ember::rand({n}), b = ember::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetBytesProcessed(state.iterations() * n * 4 * 3);
}

void ember_large_sum(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = ember::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum());
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void ember_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  ember::backends::cuda::matmul.allow_tf32 = false;  // plain fp32, as LibTorch on the CPU
  auto a = ember::rand({n, n}), b = ember::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  ember::backends::cuda::matmul.allow_tf32 = true;
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void ember_emulated_small_add(benchmark::State& state) {
  auto a = ember::ones({16}, "cuda:0"), b = ember::ones({16}, "cuda:0");
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  ember::cuda::synchronize();
}

// The host cost of a small GEMM launch on an emulated device (its cuBLAS workspace is
// taken at the first one: Note [cuBLAS workspaces]).
void ember_emulated_small_matmul(benchmark::State& state) {
  auto a = ember::ones({8, 8}, "cuda:0"), b = ember::ones({8, 8}, "cuda:0");
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  ember::cuda::synchronize();
}

// Training ops on batch-64 Fashion-MNIST-sized tensors: classifier logits [64, 10],
// images [64, 1, 28, 28], a conv layer's output [64, 8, 26, 26].
void ember_softmax_64x10(benchmark::State& state) {
  auto x = ember::randn({64, 10});
  for (auto _ : state) benchmark::DoNotOptimize(x.softmax(1));
}

void ember_softmax_64x784(benchmark::State& state) {
  auto x = ember::randn({64, 784});
  for (auto _ : state) benchmark::DoNotOptimize(x.softmax(1));
}

void ember_cross_entropy_64x10(benchmark::State& state) {
  auto x = ember::randn({64, 10});
  auto t = ember::empty({64}, ember::kInt64);
  for (int64_t i = 0; i < 64; ++i) t.data_ptr<int64_t>()[i] = i * 7 % 10;  // as the torch twin's labels
  for (auto _ : state) benchmark::DoNotOptimize(ember::nn::functional::cross_entropy(x, t));
}

void ember_max_pool2d_64x8x26x26(benchmark::State& state) {
  auto x = ember::randn({64, 8, 26, 26});
  for (auto _ : state) benchmark::DoNotOptimize(ember::nn::functional::max_pool2d(x, {2}));
}

void ember_conv2d_relu_64x1x28x28(benchmark::State& state) {
  ember::backends::cudnn.allow_tf32 = false;  // plain fp32, as LibTorch on the CPU
  auto x = ember::rand({64, 1, 28, 28}), w = ember::randn({8, 1, 3, 3}), b = ember::randn({8});
  for (auto _ : state) benchmark::DoNotOptimize(ember::relu(ember::conv2d(x, w, b)));
  ember::backends::cudnn.allow_tf32 = true;
}

// Random numbers (issue 39's generator lookup on the op path and randn's throughput): a small
// draw (host cost), with the default generator and with one of the caller's, and a large one.
void ember_small_randn(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ember::randn({16}));
}

void ember_small_randn_generator(benchmark::State& state) {
  ember::Generator gen;
  gen.manual_seed(1);
  for (auto _ : state) benchmark::DoNotOptimize(ember::randn({16}, {}, gen));
}

void ember_randn(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) benchmark::DoNotOptimize(ember::randn({n}));
  state.SetBytesProcessed(state.iterations() * n * 4);
}

#if EMBER_BENCH_WITH_TORCH
void torch_small_randn(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(torch::randn({16}));
}

void torch_small_randn_generator(benchmark::State& state) {
  auto gen = at::detail::createCPUGenerator(1);
  for (auto _ : state) benchmark::DoNotOptimize(torch::randn({16}, gen));
}

void torch_randn(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) benchmark::DoNotOptimize(torch::randn({n}));
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void torch_softmax_64x10(benchmark::State& state) {
  auto x = torch::randn({64, 10});
  for (auto _ : state) benchmark::DoNotOptimize(x.softmax(1));
}

void torch_softmax_64x784(benchmark::State& state) {
  auto x = torch::randn({64, 784});
  for (auto _ : state) benchmark::DoNotOptimize(x.softmax(1));
}

void torch_cross_entropy_64x10(benchmark::State& state) {
  auto x = torch::randn({64, 10});
  auto t = torch::arange(64, torch::kLong) * 7 % 10;
  for (auto _ : state) benchmark::DoNotOptimize(torch::nn::functional::cross_entropy(x, t));
}

void torch_max_pool2d_64x8x26x26(benchmark::State& state) {
  auto x = torch::randn({64, 8, 26, 26});
  for (auto _ : state) benchmark::DoNotOptimize(torch::max_pool2d(x, {2, 2}));
}

void torch_conv2d_relu_64x1x28x28(benchmark::State& state) {
  auto x = torch::rand({64, 1, 28, 28}), w = torch::randn({8, 1, 3, 3}), b = torch::randn({8});
  for (auto _ : state) benchmark::DoNotOptimize(torch::relu(torch::conv2d(x, w, b)));
}

void torch_small_add(benchmark::State& state) {
  auto a = torch::ones({16}), b = torch::ones({16});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}

void torch_large_add(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = torch::rand({n}), b = torch::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetBytesProcessed(state.iterations() * n * 4 * 3);
}

void torch_large_sum(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = torch::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum());
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void torch_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = torch::rand({n, n}), b = torch::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

}  // namespace

BENCHMARK(ember_small_add);
BENCHMARK(ember_large_add)->Arg(1 << 24)->UseRealTime();
BENCHMARK(ember_large_sum)->Arg(1 << 24)->UseRealTime();
BENCHMARK(ember_matmul)->Arg(1024)->UseRealTime();
BENCHMARK(ember_emulated_small_add);
BENCHMARK(ember_emulated_small_matmul);
BENCHMARK(ember_softmax_64x10);
BENCHMARK(ember_softmax_64x784)->UseRealTime();
BENCHMARK(ember_cross_entropy_64x10);
BENCHMARK(ember_max_pool2d_64x8x26x26)->UseRealTime();
BENCHMARK(ember_conv2d_relu_64x1x28x28)->UseRealTime();
BENCHMARK(ember_small_randn);
BENCHMARK(ember_small_randn_generator);
BENCHMARK(ember_randn)->Arg(1 << 22)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_softmax_64x10);
BENCHMARK(torch_softmax_64x784)->UseRealTime();
BENCHMARK(torch_cross_entropy_64x10);
BENCHMARK(torch_max_pool2d_64x8x26x26)->UseRealTime();
BENCHMARK(torch_conv2d_relu_64x1x28x28)->UseRealTime();
BENCHMARK(torch_small_add);
BENCHMARK(torch_large_add)->Arg(1 << 24)->UseRealTime();
BENCHMARK(torch_large_sum)->Arg(1 << 24)->UseRealTime();
BENCHMARK(torch_matmul)->Arg(1024)->UseRealTime();
BENCHMARK(torch_small_randn);
BENCHMARK(torch_small_randn_generator);
BENCHMARK(torch_randn)->Arg(1 << 22)->UseRealTime();
#endif

int main(int argc, char** argv) {
  ember::cuda::emulate(1, size_t{1} << 30);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  PeerRatioReporter reporter("ember / torch (real time; < 1 means ember is faster)");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
