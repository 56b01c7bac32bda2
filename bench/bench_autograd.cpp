// Autograd on the cpu, with LibTorch timed side by side in the same run:
//  chain: forward + backward through 100 small element-wise ops (host overhead of
//         recording and of the engine);
//  mlp:   forward + backward of a 784-512-512-10 MLP, batch 256, float32, cross entropy;
//  deep_chain: build, backward and free of a graph of 1,000,000 nodes (`loss = loss + w * c`
//         500,000 times: an AddBackward0 and a MulBackward0 each), which must be freed
//         without recursion (Note [Releasing long graphs] in src/autograd/node.cpp).
// The summary at the end gives ember / torch (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr int kChain = 100;
constexpr int kDeepSteps = 500'000;  // two nodes each

void ember_chain(benchmark::State& state) {
  auto x = ember::rand({16}, ember::TensorOptions().requires_grad(true));
  auto w = ember::rand({16});
  for (auto _ : state) {
    ember::Tensor y = x;
    for (int i = 0; i < kChain / 2; ++i) y = (y * w) + 0.5;
    y.sum().backward();
    x.mutable_grad() = {};
  }
}

struct EmberMlp {
  ember::Tensor w1, b1, w2, b2, w3, b3;
  EmberMlp() {
    auto p = [](ember::IntList shape) { return (ember::randn(shape) * 0.05).requires_grad_(true); };
    w1 = p({512, 784}), b1 = p({512}), w2 = p({512, 512}), b2 = p({512}), w3 = p({10, 512}), b3 = p({10});
  }
};

void ember_mlp(benchmark::State& state) {
  namespace F = ember::nn::functional;
  ember::backends::cuda::matmul.allow_tf32 = false;
  EmberMlp m;
  auto x = ember::randn({256, 784});
  std::vector<int64_t> labels(256);
  for (int i = 0; i < 256; ++i) labels[static_cast<size_t>(i)] = i % 10;
  auto target = ember::tensor(ember::TensorData(labels));
  for (auto _ : state) {
    auto h = F::linear(x, m.w1, m.b1).relu();
    h = F::linear(h, m.w2, m.b2).relu();
    auto loss = F::cross_entropy(F::linear(h, m.w3, m.b3), target);
    loss.backward();
    for (auto* p : {&m.w1, &m.b1, &m.w2, &m.b2, &m.w3, &m.b3}) p->mutable_grad() = {};
  }
  ember::backends::cuda::matmul.allow_tf32 = true;
}

void ember_deep_chain(benchmark::State& state) {
  auto w = ember::tensor({2.0f}, ember::TensorOptions().requires_grad(true));
  auto c = ember::tensor({1.0f});
  for (auto _ : state) {
    ember::Tensor loss = ember::zeros({1});
    for (int i = 0; i < kDeepSteps; ++i) loss = loss + w * c;
    loss.sum().backward();
    loss = {};  // frees the graph
    w.mutable_grad() = {};
  }
}

#if EMBER_BENCH_WITH_TORCH
void torch_deep_chain(benchmark::State& state) {
  auto w = torch::tensor({2.0f}, torch::requires_grad());
  auto c = torch::tensor({1.0f});
  for (auto _ : state) {
    torch::Tensor loss = torch::zeros({1});
    for (int i = 0; i < kDeepSteps; ++i) loss = loss + w * c;
    loss.sum().backward();
    loss = torch::Tensor();
    w.mutable_grad() = torch::Tensor();
  }
}

void torch_chain(benchmark::State& state) {
  auto x = torch::rand({16}, torch::requires_grad());
  auto w = torch::rand({16});
  for (auto _ : state) {
    torch::Tensor y = x;
    for (int i = 0; i < kChain / 2; ++i) y = (y * w) + 0.5;
    y.sum().backward();
    x.mutable_grad() = torch::Tensor();
  }
}

void torch_mlp(benchmark::State& state) {
  namespace F = torch::nn::functional;
  auto p = [](at::IntArrayRef shape) { return (torch::randn(shape) * 0.05).requires_grad_(true); };
  auto w1 = p({512, 784}), b1 = p({512}), w2 = p({512, 512}), b2 = p({512}), w3 = p({10, 512}), b3 = p({10});
  auto x = torch::randn({256, 784});
  auto target = torch::arange(256) % 10;
  for (auto _ : state) {
    auto h = F::linear(x, w1, b1).relu();
    h = F::linear(h, w2, b2).relu();
    auto loss = F::cross_entropy(F::linear(h, w3, b3), target);
    loss.backward();
    for (auto* t : {&w1, &b1, &w2, &b2, &w3, &b3}) t->mutable_grad() = torch::Tensor();
  }
}
#endif

}  // namespace

BENCHMARK(ember_chain)->UseRealTime();
BENCHMARK(ember_mlp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(ember_deep_chain)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(3);
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_chain)->UseRealTime();
BENCHMARK(torch_mlp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(torch_deep_chain)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(3);
#endif

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  PeerRatioReporter reporter("ember / torch (real time; < 1 means ember is faster)");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
