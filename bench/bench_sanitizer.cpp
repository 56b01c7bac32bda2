// Host cost of the stream sanitizer: a small add on an emulated device with the
// sanitizer off and on, and the same add into the slots of one flat buffer (each
// slot a byte range of its own: the cost of range tracking with split ranges). The off case also builds against a tree
// without the sanitizer (this file needs only the public API; the sanitizer parts compile out when ember/sanitizer.h is
// absent), so the cost of the switch itself can be compared across builds.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "ember/ember.h"
#include "runtime/backend.h"
#if __has_include("ember/sanitizer.h")
#define EMBER_BENCH_HAS_SANITIZER 1
#endif

namespace {

using namespace ember;

const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  unsetenv("EMBER_CUDA_SANITIZER");
  cuda::emulate(2, size_t{1} << 30);
  return true;
}();

// c = a + b on 64 floats, the output allocated from the cache each time: the whole
// host path of an op (checks, allocation, launch), with the stream kept busy.
void run_small_add(benchmark::State& state) {
  TensorOptions options = TensorOptions().device(kCUDA);
  Tensor a = full({64}, 1.0, options), b = full({64}, 2.0, options);
  int64_t n = 0;
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    if (++n % 1024 == 0) cuda::synchronize();  // keep the queue bounded
  }
  cuda::synchronize();
  state.SetItemsProcessed(state.iterations());
}

void BM_SmallAdd_SanitizerOff(benchmark::State& state) {
#ifdef EMBER_BENCH_HAS_SANITIZER
  cuda::sanitizer::disable();
#endif
  run_small_add(state);
}
BENCHMARK(BM_SmallAdd_SanitizerOff);

// The choke point alone: every backend call starts with detail::backend(), where the
// sanitizer adds its one branch.
void BM_BackendLookup_SanitizerOff(benchmark::State& state) {
#ifdef EMBER_BENCH_HAS_SANITIZER
  cuda::sanitizer::disable();
#endif
  for (auto _ : state) benchmark::DoNotOptimize(&detail::backend());
}
BENCHMARK(BM_BackendLookup_SanitizerOff);

// The same add on the cpu, which the sanitizer never sees: a control for differences
// between two builds that have nothing to do with it.
void BM_SmallAddCpu(benchmark::State& state) {
  Tensor a = full({64}, 1.0), b = full({64}, 2.0);
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_SmallAddCpu);

// add_ of 64 floats into slot k % 16 of a flat 1024-float buffer, as a gradient bucket
// is filled: under the sanitizer every slot is a range of its own.
void run_slot_add(benchmark::State& state) {
  TensorOptions options = TensorOptions().device(kCUDA);
  Tensor bucket = zeros({16 * 64}, options), a = full({64}, 1.0, options);
  std::vector<Tensor> slots;
  for (int64_t k = 0; k < 16; ++k) slots.push_back(bucket.narrow(0, 64 * k, 64));
  int64_t n = 0;
  for (auto _ : state) {
    slots[static_cast<size_t>(n % 16)].add_(a);
    if (++n % 1024 == 0) cuda::synchronize();
  }
  cuda::synchronize();
  state.SetItemsProcessed(state.iterations());
}

void BM_SlotAdd_SanitizerOff(benchmark::State& state) {
#ifdef EMBER_BENCH_HAS_SANITIZER
  cuda::sanitizer::disable();
#endif
  run_slot_add(state);
}
BENCHMARK(BM_SlotAdd_SanitizerOff);

#ifdef EMBER_BENCH_HAS_SANITIZER
void BM_SmallAdd_SanitizerOn(benchmark::State& state) {
  cuda::sanitizer::enable();
  run_small_add(state);
  cuda::sanitizer::disable();
}
BENCHMARK(BM_SmallAdd_SanitizerOn);

void BM_SlotAdd_SanitizerOn(benchmark::State& state) {
  cuda::sanitizer::enable();
  run_slot_add(state);
  cuda::sanitizer::disable();
}
BENCHMARK(BM_SlotAdd_SanitizerOn);
#endif

}  // namespace

BENCHMARK_MAIN();
