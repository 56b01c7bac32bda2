// Op dispatch overhead and CPU throughput through the public API, with LibTorch (CPU)
// timed side by side in the same run. Each ember benchmark has a torch twin; the
// summary printed at the end gives the ratio ember / torch (below 1: ember is faster).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "ember/ember.h"

#if EMBER_BENCH_WITH_TORCH
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

#if EMBER_BENCH_WITH_TORCH
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

// Collects real time per iteration by benchmark name to print ember/torch ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0) times_[run.benchmark_name()] = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nember / torch (real time; < 1 means ember is faster)\n");
    for (const auto& [name, t] : times_) {
      if (name.rfind("ember_", 0) != 0) continue;
      auto peer = times_.find("torch_" + name.substr(6));
      if (peer != times_.end()) std::printf("  %-28s %6.2f\n", name.substr(6).c_str(), t / peer->second);
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace

BENCHMARK(ember_small_add);
BENCHMARK(ember_large_add)->Arg(1 << 24)->UseRealTime();
BENCHMARK(ember_large_sum)->Arg(1 << 24)->UseRealTime();
BENCHMARK(ember_matmul)->Arg(1024)->UseRealTime();
BENCHMARK(ember_emulated_small_add);
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_small_add);
BENCHMARK(torch_large_add)->Arg(1 << 24)->UseRealTime();
BENCHMARK(torch_large_sum)->Arg(1 << 24)->UseRealTime();
BENCHMARK(torch_matmul)->Arg(1024)->UseRealTime();
#endif

int main(int argc, char** argv) {
  ember::cuda::emulate(1, size_t{1} << 30);
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
