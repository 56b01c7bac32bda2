// cdist and tensordot on the cpu through the public API, with LibTorch (CPU) timed side by
// side in the same run: each ember benchmark has a torch twin, and the summary gives the
// ratio ember / torch (below 1: ember is faster). cdist at the size, 1024 x 1024
// rows of 64 columns, on its matrix-product path (PyTorch's default there) and its direct
// path (p = 2 and p = 1), forward and backward; tensordot folding to a 1024 x 1024 x 1024 product.
#include <benchmark/benchmark.h>

#include "ember/ember.h"
#include "ember/linalg_distance.h"
#include "peer_ratio_reporter.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

void cdist_case(benchmark::State& state, const ember::Tensor& x1, const ember::Tensor& x2, double p, bool backward,
                const char* mode) {
  for (auto _ : state) {
    auto d = ember::cdist(x1, x2, p, mode);
    if (backward) d.sum().backward();
    benchmark::DoNotOptimize(d);
  }
}

void ember_cdist_mm_1024x1024x64(benchmark::State& state) {
  auto x1 = ember::randn({1024, 64}), x2 = ember::randn({1024, 64});
  cdist_case(state, x1, x2, 2.0, false, "use_mm_for_euclid_dist_if_necessary");
}
void ember_cdist_direct_1024x1024x64(benchmark::State& state) {
  auto x1 = ember::randn({1024, 64}), x2 = ember::randn({1024, 64});
  cdist_case(state, x1, x2, 2.0, false, "donot_use_mm_for_euclid_dist");
}
void ember_cdist_p1_1024x1024x64(benchmark::State& state) {
  auto x1 = ember::randn({1024, 64}), x2 = ember::randn({1024, 64});
  cdist_case(state, x1, x2, 1.0, false, "donot_use_mm_for_euclid_dist");
}
void ember_cdist_mm_backward_1024x1024x64(benchmark::State& state) {
  auto x1 = ember::randn({1024, 64}).requires_grad_(), x2 = ember::randn({1024, 64}).requires_grad_();
  cdist_case(state, x1, x2, 2.0, true, "use_mm_for_euclid_dist_if_necessary");
}
void ember_cdist_direct_backward_1024x1024x64(benchmark::State& state) {
  auto x1 = ember::randn({1024, 64}).requires_grad_(), x2 = ember::randn({1024, 64}).requires_grad_();
  cdist_case(state, x1, x2, 2.0, true, "donot_use_mm_for_euclid_dist");
}
// cdist(x, x): every row has a distance of 0 to itself, which the product path recomputes.
void ember_cdist_self_1024x64(benchmark::State& state) {
  auto x = ember::randn({1024, 64});
  cdist_case(state, x, x, 2.0, false, "use_mm_for_euclid_dist_if_necessary");
}
void ember_tensordot_64x16x64_16x64x1024(benchmark::State& state) {
  auto a = ember::randn({64, 16, 64}), b = ember::randn({16, 64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(ember::tensordot(a, b, 2));
}

BENCHMARK(ember_cdist_mm_1024x1024x64)->UseRealTime();
BENCHMARK(ember_cdist_direct_1024x1024x64)->UseRealTime();
BENCHMARK(ember_cdist_p1_1024x1024x64)->UseRealTime();
BENCHMARK(ember_cdist_mm_backward_1024x1024x64)->UseRealTime();
BENCHMARK(ember_cdist_direct_backward_1024x1024x64)->UseRealTime();
BENCHMARK(ember_cdist_self_1024x64)->UseRealTime();
BENCHMARK(ember_tensordot_64x16x64_16x64x1024)->UseRealTime();

#if EMBER_BENCH_WITH_TORCH
int64_t torch_mode(const char* mode) {
  const std::string m = mode;
  return m == "use_mm_for_euclid_dist_if_necessary" ? 0 : m == "use_mm_for_euclid_dist" ? 1 : 2;
}
void torch_cdist_case(benchmark::State& state, const torch::Tensor& x1, const torch::Tensor& x2, double p,
                      bool backward, const char* mode) {
  for (auto _ : state) {
    auto d = torch::cdist(x1, x2, p, torch_mode(mode));
    if (backward) d.sum().backward();
    benchmark::DoNotOptimize(d);
  }
}
void torch_cdist_mm_1024x1024x64(benchmark::State& state) {
  auto x1 = torch::randn({1024, 64}), x2 = torch::randn({1024, 64});
  torch_cdist_case(state, x1, x2, 2.0, false, "use_mm_for_euclid_dist_if_necessary");
}
void torch_cdist_direct_1024x1024x64(benchmark::State& state) {
  auto x1 = torch::randn({1024, 64}), x2 = torch::randn({1024, 64});
  torch_cdist_case(state, x1, x2, 2.0, false, "donot_use_mm_for_euclid_dist");
}
void torch_cdist_p1_1024x1024x64(benchmark::State& state) {
  auto x1 = torch::randn({1024, 64}), x2 = torch::randn({1024, 64});
  torch_cdist_case(state, x1, x2, 1.0, false, "donot_use_mm_for_euclid_dist");
}
void torch_cdist_mm_backward_1024x1024x64(benchmark::State& state) {
  auto x1 = torch::randn({1024, 64}).requires_grad_(), x2 = torch::randn({1024, 64}).requires_grad_();
  torch_cdist_case(state, x1, x2, 2.0, true, "use_mm_for_euclid_dist_if_necessary");
}
void torch_cdist_direct_backward_1024x1024x64(benchmark::State& state) {
  auto x1 = torch::randn({1024, 64}).requires_grad_(), x2 = torch::randn({1024, 64}).requires_grad_();
  torch_cdist_case(state, x1, x2, 2.0, true, "donot_use_mm_for_euclid_dist");
}
void torch_cdist_self_1024x64(benchmark::State& state) {
  auto x = torch::randn({1024, 64});
  torch_cdist_case(state, x, x, 2.0, false, "use_mm_for_euclid_dist_if_necessary");
}
void torch_tensordot_64x16x64_16x64x1024(benchmark::State& state) {
  auto a = torch::randn({64, 16, 64}), b = torch::randn({16, 64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(torch::tensordot(a, b, {1, 2}, {0, 1}));
}

BENCHMARK(torch_cdist_mm_1024x1024x64)->UseRealTime();
BENCHMARK(torch_cdist_direct_1024x1024x64)->UseRealTime();
BENCHMARK(torch_cdist_p1_1024x1024x64)->UseRealTime();
BENCHMARK(torch_cdist_mm_backward_1024x1024x64)->UseRealTime();
BENCHMARK(torch_cdist_direct_backward_1024x1024x64)->UseRealTime();
BENCHMARK(torch_cdist_self_1024x64)->UseRealTime();
BENCHMARK(torch_tensordot_64x16x64_16x64x1024)->UseRealTime();
#endif

}  // namespace

EMBER_PEER_BENCHMARK_MAIN()
