// nn::AdaptiveLogSoftmaxWithLoss on a 10k vocabulary on the cpu, with LibTorch (CPU) timed side
// by side in the same run: a word model's output layer (512 features, cutoffs 1000 and 4000,
// div_value 4, 256 rows: 8 sequences of 32 tokens), forward + backward of the loss, and
// log_prob over the whole vocabulary. Targets follow a Zipf-like law, as words do, so most
// rows stay in the shortlist and each tail sees a few. The summary gives ember / torch.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr int64_t kFeatures = 512, kClasses = 10000, kRows = 256;

// Class ids whose frequency falls as 1 / rank (a fixed sequence, the same for both libraries).
std::vector<int64_t> zipf_targets() {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < kRows; ++i) {
    const double u = (static_cast<double>(i) + 0.5) / kRows;  // quantiles of the law
    t.push_back(std::min<int64_t>(kClasses - 1, static_cast<int64_t>(std::pow(kClasses, u)) - 1));
  }
  // Interleave so that rows of one cluster are not adjacent.
  std::vector<int64_t> out;
  for (int64_t i = 0; i < kRows; i += 2) out.push_back(t[i]);
  for (int64_t i = 1; i < kRows; i += 2) out.push_back(t[i]);
  return out;
}

void ember_adaptive_10k_forward_backward(benchmark::State& state) {
  ember::manual_seed(0);
  ember::nn::AdaptiveLogSoftmaxWithLoss module(kFeatures, kClasses, {1000, 4000});
  auto x = ember::randn({kRows, kFeatures}).requires_grad_(true);
  auto target = ember::tensor(ember::TensorData(zipf_targets()), ember::TensorOptions(ember::kInt64));
  for (auto _ : state) {
    module.zero_grad();
    x.mutable_grad() = ember::Tensor();
    module(x, target).loss.backward();
  }
}
void ember_adaptive_10k_log_prob(benchmark::State& state) {
  ember::manual_seed(0);
  ember::nn::AdaptiveLogSoftmaxWithLoss module(kFeatures, kClasses, {1000, 4000});
  auto x = ember::randn({kRows, kFeatures});
  ember::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(module.log_prob(x));
}

BENCHMARK(ember_adaptive_10k_forward_backward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(ember_adaptive_10k_log_prob)->UseRealTime()->Unit(benchmark::kMicrosecond);

#if EMBER_BENCH_WITH_TORCH
torch::nn::AdaptiveLogSoftmaxWithLoss torch_module() {
  torch::manual_seed(0);
  return torch::nn::AdaptiveLogSoftmaxWithLoss(
      torch::nn::AdaptiveLogSoftmaxWithLossOptions(kFeatures, kClasses, {1000, 4000}));
}

void torch_adaptive_10k_forward_backward(benchmark::State& state) {
  auto module = torch_module();
  auto x = torch::randn({kRows, kFeatures}).requires_grad_(true);
  auto target = torch::tensor(zipf_targets(), torch::kInt64);
  for (auto _ : state) {
    module->zero_grad();
    x.mutable_grad() = torch::Tensor();
    (-module(x, target).output).mean().backward();  // LibTorch 1.13's ASMoutput::loss is a double
  }
}
void torch_adaptive_10k_log_prob(benchmark::State& state) {
  auto module = torch_module();
  auto x = torch::randn({kRows, kFeatures});
  torch::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(module->log_prob(x));
}

BENCHMARK(torch_adaptive_10k_forward_backward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(torch_adaptive_10k_log_prob)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

EMBER_PEER_BENCHMARK_MAIN()
