// DataLoader throughput over Fashion-MNIST (batch 64, shuffled, 0 and 2 workers) beside
// LibTorch 1.13's C++ DataLoader on the same data in the same run, and a training-shaped
// loop on an emulated device (copy each batch over, run a small model step) with
// pin_memory + non_blocking against pageable, blocking copies.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "ember/ember.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr size_t kBatch = 64;

const ember::data::FashionMNIST& train_set() {
  static const ember::data::FashionMNIST ds(ember::data::FashionMNIST::kDefaultRoot, /*train=*/true);
  return ds;
}

const ember::data::FashionMNIST& test_set() {
  static const ember::data::FashionMNIST ds(ember::data::FashionMNIST::kDefaultRoot, /*train=*/false);
  return ds;
}

void set_batches_per_second(benchmark::State& state, int64_t batches) {
  state.counters["batches/s"] = benchmark::Counter(static_cast<double>(batches), benchmark::Counter::kIsRate);
}

// One epoch per iteration: every batch is loaded, stacked and handed over.
void ember_epoch(benchmark::State& state) {
  auto options = ember::data::DataLoaderOptions().batch_size(kBatch).shuffle(true).seed(0);
  options.num_workers(static_cast<int>(state.range(0)));
  ember::data::DataLoader loader(train_set(), options);
  int64_t batches = 0;
  for (auto _ : state) {
    for (const ember::data::Example& batch : loader) {
      benchmark::DoNotOptimize(batch.data.data_ptr());
      ++batches;
    }
  }
  set_batches_per_second(state, batches);
}

#if EMBER_BENCH_WITH_TORCH
// The same images and labels, as LibTorch tensors; get() returns views as ember's does.
class TorchFashion : public torch::data::datasets::Dataset<TorchFashion> {
 public:
  TorchFashion() {
    const auto& src = train_set();
    images_ = torch::from_blob(src.images().data_ptr(), {static_cast<int64_t>(src.size()), 1, 28, 28}).clone();
    labels_ = torch::from_blob(src.targets().data_ptr(), {static_cast<int64_t>(src.size())}, torch::kInt64).clone();
  }
  torch::data::Example<> get(size_t index) override {
    auto i = static_cast<int64_t>(index);
    return {images_[i], labels_[i]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(images_.size(0)); }

 private:
  torch::Tensor images_, labels_;
};

void torch_epoch(benchmark::State& state) {
  static TorchFashion dataset;
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      dataset.map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(kBatch).workers(static_cast<size_t>(state.range(0))));
  int64_t batches = 0;
  for (auto _ : state) {
    for (auto& batch : *loader) {
      benchmark::DoNotOptimize(batch.data.data_ptr());
      ++batches;
    }
  }
  set_batches_per_second(state, batches);
}
#endif

// A training-shaped loop on cuda:0 over the test set: copy each batch to the device, run a
// small model step (a linear layer, relu, a sum), synchronize at the end of the epoch.
// Arg 1: pin_memory + non_blocking copies; arg 0: pageable memory, blocking copies.
void ember_emulated_train_loop(benchmark::State& state) {
  bool pinned = state.range(0) != 0;
  ember::Device cuda0("cuda:0");
  ember::manual_seed(0);
  ember::Tensor weight = ember::randn({784, 64}, cuda0);
  auto options = ember::data::DataLoaderOptions().batch_size(kBatch).shuffle(true).num_workers(2);
  options.pin_memory(pinned);
  ember::data::DataLoader loader(test_set(), options);
  int64_t batches = 0;
  for (auto _ : state) {
    ember::Tensor total = ember::zeros({}, cuda0);
    for (const ember::data::Example& batch : loader) {
      ember::Tensor x = batch.data.to(cuda0, /*non_blocking=*/pinned).view({-1, 784});
      ember::Tensor y = batch.target.to(cuda0, /*non_blocking=*/pinned);
      total += x.matmul(weight).relu().sum() + y.sum();
      ++batches;
    }
    ember::cuda::synchronize();
    benchmark::DoNotOptimize(total);
  }
  set_batches_per_second(state, batches);
}

// Throughput ratios per epoch, then the pinned vs pageable training loop.
class LoaderReporter : public PeerRatioReporter {
 public:
  LoaderReporter()
      : PeerRatioReporter("throughput ember / torch (real time per epoch; > 1 means ember is faster)",
                          /*throughput=*/true) {}

 protected:
  void print_more() const override {
    auto pinned = times().find("ember_emulated_train_loop/1/real_time");
    auto pageable = times().find("ember_emulated_train_loop/0/real_time");
    if (pinned != times().end() && pageable != times().end())
      std::printf("train loop, pageable / pinned+non_blocking time: %.2f (> 1 means pinning is faster)\n",
                  pageable->second / pinned->second);
  }
};

}  // namespace

BENCHMARK(ember_epoch)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_epoch)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(ember_emulated_train_loop)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  ember::cuda::emulate(1, size_t{1} << 30);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  LoaderReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
