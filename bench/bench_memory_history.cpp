// What record_memory_history costs on the caching allocator's hot path.
//
// One malloc+free pair of a cached size on one stream (the allocator's fastest path),
// over the FakeBackend: with history off (every pair pays only the `recording_` test),
// and with history on (a timestamped trace entry and a captured C++ stack for the alloc,
// the free request and its completion); then the cost of writing the trace as JSON.
// Off is the number to compare with bench_allocator's BM_CachedSameSize/bytes:4096 of a
// build without stack recording.
#include <benchmark/benchmark.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../tests/test_caching_allocator_fake_backend.h"
#include "memory/caching_allocator.h"

namespace {

using ember::detail::CachingAllocator;
using ember::detail::StreamRef;

constexpr size_t kDeviceBytes = size_t{1} << 40;  // address space only
constexpr size_t kBytes = 4096;

void run_pairs(benchmark::State& state, CachingAllocator& allocator, const StreamRef& stream) {
  void* warm = allocator.malloc(kBytes, stream);  // the segment exists before timing
  allocator.free(warm);
  for (auto _ : state) {
    void* ptr = allocator.malloc(kBytes, stream);
    benchmark::DoNotOptimize(ptr);
    allocator.free(ptr);
  }
  state.counters["per_pair"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_PairHistoryOff(benchmark::State& state) {
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  CachingAllocator allocator(backend, 0, {});
  run_pairs(state, allocator, StreamRef{backend.default_stream(0), 0, 0});
}

void BM_PairHistoryOn(benchmark::State& state) {
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  CachingAllocator allocator(backend, 0, {});
  allocator.record_history(true, 100000);
  run_pairs(state, allocator, StreamRef{backend.default_stream(0), 0, 0});
}

// The snapshot a user writes after such a run: 100,000 entries (the default bound) with
// their stacks; symbols are looked up once per distinct stack.
void BM_TraceJsonOf100kEntries(benchmark::State& state) {
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  CachingAllocator allocator(backend, 0, {});
  allocator.record_history(true, 100000);
  const StreamRef stream{backend.default_stream(0), 0, 0};
  for (int i = 0; i < 100000 / 3 + 1; ++i) allocator.free(allocator.malloc(kBytes, stream));
  for (auto _ : state) {
    std::string text = allocator.trace_json().dump();
    benchmark::DoNotOptimize(text.data());
    state.counters["json_MiB"] = static_cast<double>(text.size()) / (1 << 20);
  }
}

BENCHMARK(BM_PairHistoryOff);
BENCHMARK(BM_PairHistoryOn);
BENCHMARK(BM_TraceJsonOf100kEntries)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
