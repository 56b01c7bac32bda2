// Training steps (zero_grad, forward, cross-entropy, backward, Adam step) on the cpu, batch
// 64, for examples/train's CNN and an MLP, with LibTorch (CPU) timed side by side in the
// same run. The summary gives ember / torch per step (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "peer_ratio_reporter.h"
#include "ember/data.h"
#include "ember/ember.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr int64_t kBatch = 64;

using ModuleList = std::initializer_list<std::shared_ptr<ember::nn::Module>>;

std::shared_ptr<ember::nn::Sequential> ember_cnn() {
  using namespace ember::nn;
  return std::make_shared<Sequential>(ModuleList{
      std::make_shared<Conv2d>(1, 16, 3, 1, 1), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
      std::make_shared<Conv2d>(16, 32, 3, 1, 1), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
      std::make_shared<Flatten>(), std::make_shared<Linear>(32 * 7 * 7, 128), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(0.25), std::make_shared<Linear>(128, 10)});
}

std::shared_ptr<ember::nn::Sequential> ember_mlp() {
  using namespace ember::nn;
  return std::make_shared<Sequential>(ModuleList{
      std::make_shared<Flatten>(), std::make_shared<Linear>(784, 256), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, 128), std::make_shared<ReLU>(), std::make_shared<Linear>(128, 10)});
}

void ember_train_steps(benchmark::State& state, const std::shared_ptr<ember::nn::Sequential>& net) {
  ember::manual_seed(0);
  ember::optim::Adam adam(net->parameters(), ember::optim::AdamOptions(1e-3));
  ember::Tensor x = ember::rand({kBatch, 1, 28, 28});
  std::vector<int64_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[static_cast<size_t>(i)] = i % 10;
  ember::Tensor y = ember::tensor(labels);
  for (auto _ : state) {
    adam.zero_grad();
    ember::Tensor loss = ember::nn::functional::cross_entropy((*net)(x), y);
    loss.backward();
    adam.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void ember_cnn_step(benchmark::State& state) { ember_train_steps(state, ember_cnn()); }
void ember_mlp_step(benchmark::State& state) { ember_train_steps(state, ember_mlp()); }

#if EMBER_BENCH_WITH_TORCH
void torch_train_steps(benchmark::State& state, torch::nn::Sequential net) {
  torch::manual_seed(0);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  torch::Tensor x = torch::rand({kBatch, 1, 28, 28});
  torch::Tensor y = torch::arange(kBatch, torch::kLong) % 10;
  for (auto _ : state) {
    adam.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    adam.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void torch_cnn_step(benchmark::State& state) {
  namespace tnn = torch::nn;
  torch_train_steps(state, tnn::Sequential(
                               tnn::Conv2d(tnn::Conv2dOptions(1, 16, 3).padding(1)), tnn::ReLU(),
                               tnn::MaxPool2d(tnn::MaxPool2dOptions(2)),
                               tnn::Conv2d(tnn::Conv2dOptions(16, 32, 3).padding(1)), tnn::ReLU(),
                               tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Flatten(),
                               tnn::Linear(32 * 7 * 7, 128), tnn::ReLU(), tnn::Dropout(0.25), tnn::Linear(128, 10)));
}

void torch_mlp_step(benchmark::State& state) {
  namespace tnn = torch::nn;
  torch_train_steps(state, tnn::Sequential(tnn::Flatten(), tnn::Linear(784, 256), tnn::ReLU(), tnn::Linear(256, 128),
                                           tnn::ReLU(), tnn::Linear(128, 10)));
}
#endif

}  // namespace

BENCHMARK(ember_cnn_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_mlp_step)->Unit(benchmark::kMillisecond)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_cnn_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(torch_mlp_step)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  PeerRatioReporter reporter("ember / torch per training step (real time; < 1 means ember is faster)");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
