// The cuFFT plan cache's payoff: an FFT call with its plan cached against the same call
// with caching off (cufft_plan_cache.max_size = 0, so every call plans anew), on a cuda
// device (the GPU when there is one, else an emulated device, whose plans are FFTW's),
// plus the plan creation counter, which shows that only the uncached run plans. Wall
// time includes the transform itself; CPU time is the calling thread's share, where
// planning happens (on emulated devices the transform runs on a stream worker).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "ember/ember.h"
#include "fft/plan_cache.h"

namespace {

const bool kCudaChosen = [] {
  if (!std::getenv("EMBER_EMULATED_DEVICES") && !ember::cuda::driver_is_available())
    ember::cuda::emulate(1, size_t{4} << 30);
  return true;
}();

// Args: signal length n, batch, cached (1) or not (0). One iteration = one fft call
// and the wait for its result, as a user synchronizing each step sees it.
void BM_FftPlanCache(benchmark::State& state) {
  const int64_t n = state.range(0), batch = state.range(1);
  const bool cached = state.range(2) != 0;
  auto cache = ember::backends::cuda::cufft_plan_cache[0];
  cache.clear();
  cache.set_max_size(cached ? 4096 : 0);
  ember::Tensor x = ember::randn({batch, n}, "cuda:0").to(ember::kComplex64);
  ember::fft::fft(x);  // warm up: the cached run plans here, outside the timing
  ember::cuda::synchronize(0);
  const int64_t plans_before = ember::detail::fft::device_plan_cache(0).plans_created();
  for (auto _ : state) {
    ember::Tensor y = ember::fft::fft(x);
    ember::cuda::synchronize(0);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["plans_per_call"] =
      double(ember::detail::fft::device_plan_cache(0).plans_created() - plans_before) / double(state.iterations());
  state.SetItemsProcessed(state.iterations() * batch);
  cache.set_max_size(4096);
}

BENCHMARK(BM_FftPlanCache)
    ->ArgNames({"n", "batch", "cached"})
    ->Args({64, 16, 1})
    ->Args({64, 16, 0})
    ->Args({1009, 16, 1})
    ->Args({1009, 16, 0})
    ->Args({4096, 64, 1})
    ->Args({4096, 64, 0})
    ->Args({65536, 4, 1})
    ->Args({65536, 4, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
