// Mixed precision's training step: examples/train's CNN (batch 64, Adam) under bfloat16
// autocast on the cpu, beside LibTorch 1.13's same step under its cpu autocast
// (at::autocast::set_cpu_enabled), and both in float32; and the float16 step with a
// GradScaler on a cuda device (emulated unless a GPU is there) beside its float32 step. An
// emulated device computes float16 through float32, so there the ratio is the cost of the
// casts, the scaler's two launches and its one synchronisation, not a GPU's speed-up.
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <vector>

#include "../examples/train_model.h"
#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#endif

namespace {

constexpr int64_t kBatch = 64;

void ember_step(benchmark::State& state, ember::Device device, bool amp) {
  if (device.is_cuda()) {
    static const bool ready = [] {  // one emulated device unless a GPU is there
      if (!ember::cuda::driver_is_available()) ember::cuda::emulate(1);
      return true;
    }();
    (void)ready;
  }
  ember::manual_seed(0);
  auto net = std::make_shared<examples::FashionCnn>();
  net->to(device);
  ember::optim::Adam adam(net->parameters(), ember::optim::AdamOptions(1e-3));
  const ember::Tensor x = ember::rand({kBatch, 1, 28, 28}).to(device);
  std::vector<int64_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[static_cast<size_t>(i)] = i % 10;
  const ember::Tensor y = ember::tensor(labels).to(device);
  const ember::DType low = device.is_cuda() ? ember::kFloat16 : ember::kBFloat16;
  ember::amp::GradScaler scaler(device, 65536.0, 2.0, 0.5, 2000, /*enabled=*/amp && low == ember::kFloat16);
  for (auto _ : state) {
    adam.zero_grad();
    ember::Tensor loss;
    {
      std::optional<ember::autocast> guard;
      if (amp) guard.emplace(device.type(), low);
      loss = ember::nn::functional::cross_entropy(net->forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(adam);  // a disabled scaler steps as is
    scaler.update();
    if (device.is_cuda()) ember::cuda::synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void ember_cpu_bf16_step(benchmark::State& state) { ember_step(state, ember::Device(ember::kCPU), true); }
void ember_cpu_f32_step(benchmark::State& state) { ember_step(state, ember::Device(ember::kCPU), false); }
void ember_emulated_f16_step(benchmark::State& state) { ember_step(state, ember::Device(ember::kCUDA, 0), true); }
void ember_emulated_f32_step(benchmark::State& state) { ember_step(state, ember::Device(ember::kCUDA, 0), false); }

#if EMBER_BENCH_WITH_TORCH
void torch_step(benchmark::State& state, bool amp) {
  namespace tnn = torch::nn;
  torch::manual_seed(0);
  tnn::Sequential net(tnn::Conv2d(tnn::Conv2dOptions(1, 16, 3).padding(1)), tnn::ReLU(),
                      tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Conv2d(tnn::Conv2dOptions(16, 32, 3).padding(1)),
                      tnn::ReLU(), tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Flatten(),
                      tnn::Linear(32 * 7 * 7, 128), tnn::ReLU(), tnn::Dropout(0.25), tnn::Linear(128, 10));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  const torch::Tensor x = torch::rand({kBatch, 1, 28, 28});
  const torch::Tensor y = torch::arange(kBatch, torch::kLong) % 10;
  for (auto _ : state) {
    adam.zero_grad();
    torch::Tensor loss;
    if (amp) {  // torch.autocast('cpu', dtype=torch.bfloat16) as the C++ API spells it
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::increment_nesting();
    }
    loss = torch::nn::functional::cross_entropy(net->forward((x - 0.2860) / 0.3530), y);
    if (amp) {
      if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      at::autocast::set_cpu_enabled(false);
    }
    loss.backward();
    adam.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void torch_cpu_bf16_step(benchmark::State& state) { torch_step(state, true); }
void torch_cpu_f32_step(benchmark::State& state) { torch_step(state, false); }
#endif

}  // namespace

BENCHMARK(ember_cpu_bf16_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_cpu_f32_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_emulated_f16_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_emulated_f32_step)->Unit(benchmark::kMillisecond)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_cpu_bf16_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(torch_cpu_f32_step)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

EMBER_PEER_BENCHMARK_MAIN()
