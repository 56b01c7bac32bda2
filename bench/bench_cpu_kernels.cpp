// Host kernel throughput: 16M-element float add and sum, ember's cpu::run beside
// LibTorch's CPU kernels in the same run (when built with EMBER_BENCH_WITH_TORCH).
// items_per_second is elements per second; ns/element = 1e9 / items_per_second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "kernels/kernel_call.h"
#include "kernels/parallel.h"

#if defined(EMBER_BENCH_WITH_TORCH)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace {

using ember::detail::KernelCall;
using ember::detail::OpKind;
using ember::detail::TensorArg;

constexpr int64_t kNumel = int64_t{1} << 24;

TensorArg dense(std::vector<float>& v, ember::IntList sizes) {
  return TensorArg{v.data(), ember::kFloat32, sizes, sizes.empty() ? ember::IntList{} : ember::IntList{1}};
}

void BM_EmberAddFloat(benchmark::State& state) {
  std::vector<float> a(kNumel, 1.0f), b(kNumel, 2.0f), out(kNumel);
  KernelCall call;
  call.op = OpKind::Add;
  call.outputs = {dense(out, {kNumel})};
  call.inputs = {dense(a, {kNumel}), dense(b, {kNumel})};
  call.args = ember::detail::kargs::Alpha{1};
  for (auto _ : state) {
    ember::detail::cpu::run(call);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kNumel);
  state.counters["threads"] = ember::detail::num_threads();
}
BENCHMARK(BM_EmberAddFloat)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EmberSumFloat(benchmark::State& state) {
  std::vector<float> a(kNumel, 1.0f), out(1);
  KernelCall call;
  call.op = OpKind::Sum;
  call.outputs = {dense(out, {})};
  call.inputs = {dense(a, {kNumel})};
  call.args = ember::detail::kargs::Dim{-1};
  for (auto _ : state) {
    ember::detail::cpu::run(call);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kNumel);
}
BENCHMARK(BM_EmberSumFloat)->Unit(benchmark::kMillisecond)->UseRealTime();

// Reducing the outer dim of a contiguous 4096x4096 matrix (column sums).
void BM_EmberSumDim0Float(benchmark::State& state) {
  const int64_t n = 4096;
  std::vector<float> a(n * n, 1.0f), out(n);
  KernelCall call;
  call.op = OpKind::Sum;
  call.outputs = {TensorArg{out.data(), ember::kFloat32, {n}, {1}}};
  call.inputs = {TensorArg{a.data(), ember::kFloat32, {n, n}, {n, 1}}};
  call.args = ember::detail::kargs::Dim{0};
  for (auto _ : state) {
    ember::detail::cpu::run(call);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n * n);
}
BENCHMARK(BM_EmberSumDim0Float)->Unit(benchmark::kMillisecond)->UseRealTime();

#if defined(EMBER_BENCH_WITH_TORCH)
void BM_TorchSumDim0Float(benchmark::State& state) {
  at::Tensor a = at::ones({4096, 4096}), out = at::empty({4096});
  for (auto _ : state) {
    at::sum_out(out, a, {0});
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * 4096 * 4096);
}
BENCHMARK(BM_TorchSumDim0Float)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TorchAddFloat(benchmark::State& state) {
  at::Tensor a = at::ones({kNumel}), b = at::full({kNumel}, 2.0f), out = at::empty({kNumel});
  for (auto _ : state) {
    at::add_out(out, a, b);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kNumel);
  state.counters["threads"] = at::get_num_threads();
}
BENCHMARK(BM_TorchAddFloat)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TorchSumFloat(benchmark::State& state) {
  at::Tensor a = at::ones({kNumel}), out = at::empty({});
  for (auto _ : state) {
    at::sum_out(out, a, at::IntArrayRef{});
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kNumel);
}
BENCHMARK(BM_TorchSumFloat)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
