// Caching allocator throughput and fragmentation on random allocation traces.
//
// Traces follow RMM's random_allocations benchmark: 1000 allocations of sizes drawn
// uniformly from [1, max], interleaved with frees of random live allocations (each
// step allocates with probability 73%, while live bytes stay under 16 GiB); everything
// left is freed at the end. Each trace is replayed against the caching allocator (warm
// cache: the replay repeats) and, in the same run, against plain backend raw_alloc /
// raw_free. Reported per size range: seconds per malloc+free pair, and the peak
// reserved / peak allocated bytes of one replay from a cold cache (fragmentation).
//
// The backend is the test FakeBackend (address-space-only device memory), so the raw
// baseline measures the fake's bookkeeping, not a real cudaMalloc.
//
// BM_AllocatorModes replays the same traces on an emulated device in the three
// PYTORCH_CUDA_ALLOC_CONF modes, in the same run: the caching allocator with fixed
// segments (native), with expandable_segments:True, and the stream-ordered pool behind
// backend:cudaMallocAsync (its frees are queued on the stream, and each replay ends by
// waiting for them).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "../tests/test_caching_allocator_fake_backend.h"
#include "memory/caching_allocator.h"
#include "runtime/backend.h"

namespace {

using ember::detail::CachingAllocator;
using ember::detail::StreamRef;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kDeviceBytes = size_t{1} << 42;  // address space only
constexpr int kAllocations = 1000;
constexpr size_t kMaxLiveBytes = size_t{16} << 30;

struct Op {
  bool allocate;
  size_t value;  // size to allocate, or index into the live list to free
};

struct Trace {
  std::vector<Op> ops;
  int64_t allocations = 0;
};

Trace make_trace(size_t max_bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> size(1, max_bytes);
  Trace trace;
  std::vector<size_t> live;  // sizes, in the order replay keeps its live list
  size_t live_bytes = 0;
  while (trace.allocations < kAllocations || !live.empty()) {
    const size_t bytes = size(rng);
    const bool room = trace.allocations < kAllocations && live_bytes + bytes <= kMaxLiveBytes;
    if (room && (live.empty() || rng() % 100 < 73)) {
      trace.ops.push_back({true, bytes});
      live.push_back(bytes);
      live_bytes += bytes;
      ++trace.allocations;
    } else {
      const size_t index = rng() % live.size();
      trace.ops.push_back({false, index});
      live_bytes -= live[index];
      live[index] = live.back();
      live.pop_back();
    }
  }
  return trace;
}

// Replays `trace` with allocate(size) / release(ptr); frees swap-remove from the live list.
template <typename Allocate, typename Release>
void replay(const Trace& trace, std::vector<void*>& live, Allocate&& allocate, Release&& release) {
  live.clear();
  for (const Op& op : trace.ops) {
    if (op.allocate) {
      live.push_back(allocate(op.value));
    } else {
      void* ptr = live[op.value];
      live[op.value] = live.back();
      live.pop_back();
      release(ptr);
    }
  }
}

void set_pair_counters(benchmark::State& state, const Trace& trace) {
  state.SetItemsProcessed(trace.allocations * static_cast<int64_t>(state.iterations()));
  state.counters["per_pair"] =
      benchmark::Counter(static_cast<double>(trace.allocations),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_CachingAllocator(benchmark::State& state) {
  const size_t max_bytes = static_cast<size_t>(state.range(0)) * kMiB;
  const Trace trace = make_trace(max_bytes, 42);
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  CachingAllocator allocator(backend, 0, {});
  const StreamRef stream{backend.default_stream(0), 0, 0};
  std::vector<void*> live;
  live.reserve(trace.ops.size());
  auto allocate = [&](size_t bytes) { return allocator.malloc(bytes, stream); };
  auto release = [&](void* ptr) { allocator.free(ptr); };

  // One replay from a cold cache gives the fragmentation figures.
  replay(trace, live, allocate, release);
  const auto stats = allocator.stats();
  const double peak_reserved = static_cast<double>(stats.reserved_bytes[ember::detail::kAggregate].peak);
  const double peak_allocated = static_cast<double>(stats.allocated_bytes[ember::detail::kAggregate].peak);
  for (auto _ : state) replay(trace, live, allocate, release);

  set_pair_counters(state, trace);
  state.counters["peak_reserved_MiB"] = peak_reserved / static_cast<double>(kMiB);
  state.counters["peak_allocated_MiB"] = peak_allocated / static_cast<double>(kMiB);
  state.counters["reserved_over_allocated"] = peak_reserved / peak_allocated;
}

void BM_RawBackendAlloc(benchmark::State& state) {
  const size_t max_bytes = static_cast<size_t>(state.range(0)) * kMiB;
  const Trace trace = make_trace(max_bytes, 42);
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  std::vector<void*> live;
  live.reserve(trace.ops.size());
  auto allocate = [&](size_t bytes) { return backend.raw_alloc(0, bytes); };
  auto release = [&](void* ptr) { backend.raw_free(0, ptr); };
  for (auto _ : state) replay(trace, live, allocate, release);
  set_pair_counters(state, trace);
}

// The cached path alone: one size, freed and allocated again on the same stream.
void BM_CachedSameSize(benchmark::State& state) {
  ember::testing::FakeBackend backend(1, kDeviceBytes);
  CachingAllocator allocator(backend, 0, {});
  const StreamRef stream{backend.default_stream(0), 0, 0};
  const auto bytes = static_cast<size_t>(state.range(0));
  void* warm = allocator.malloc(bytes, stream);  // the segment exists before timing
  allocator.free(warm);
  for (auto _ : state) {
    void* ptr = allocator.malloc(bytes, stream);
    benchmark::DoNotOptimize(ptr);
    allocator.free(ptr);
  }
  state.counters["per_pair"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// mode 0: native, 1: expandable_segments:True, 2: backend:cudaMallocAsync's pool.
void BM_AllocatorModes(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const size_t max_bytes = static_cast<size_t>(state.range(1)) * kMiB;
  const Trace trace = make_trace(max_bytes, 42);
  auto backend = ember::detail::make_emulated_backend(2 * kMaxLiveBytes, {0});  // room for fragmentation
  ember::detail::AllocatorConfig config;
  config.expandable_segments = mode == 1;
  CachingAllocator allocator(*backend, 0, config);
  ember::detail::BackendStream* native = backend->default_stream(0);
  const StreamRef stream{native, 0, 0};
  std::vector<void*> live;
  live.reserve(trace.ops.size());
  auto run = [&] {
    if (mode == 2) {
      replay(
          trace, live, [&](size_t bytes) { return backend->stream_alloc(0, bytes, native); },
          [&](void* ptr) { backend->stream_free(0, ptr, native); });
      backend->synchronize_device(0);
    } else {
      replay(
          trace, live, [&](size_t bytes) { return allocator.malloc(bytes, stream); },
          [&](void* ptr) { allocator.free(ptr); });
    }
  };
  run();  // from a cold cache: the fragmentation figures
  double peak_reserved = 0, peak_allocated = 0;
  if (mode == 2) {
    const auto pool = backend->pool_usage(0);
    peak_reserved = static_cast<double>(pool.reserved_high);
    peak_allocated = static_cast<double>(pool.used_high);
  } else {
    const auto stats = allocator.stats();
    peak_reserved = static_cast<double>(stats.reserved_bytes[ember::detail::kAggregate].peak);
    peak_allocated = static_cast<double>(stats.allocated_bytes[ember::detail::kAggregate].peak);
  }
  for (auto _ : state) run();
  set_pair_counters(state, trace);
  state.counters["peak_reserved_MiB"] = peak_reserved / static_cast<double>(kMiB);
  state.counters["reserved_over_allocated"] = peak_reserved / peak_allocated;
  if (mode == 2) backend->trim_pool(0);
}

BENCHMARK(BM_CachedSameSize)->Arg(4096)->Arg(4 << 20)->Arg(64 << 20)->ArgName("bytes");
BENCHMARK(BM_CachingAllocator)->Arg(1)->Arg(4)->Arg(64)->ArgName("max_MiB")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RawBackendAlloc)->Arg(1)->Arg(4)->Arg(64)->ArgName("max_MiB")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocatorModes)
    ->ArgsProduct({{0, 1, 2}, {1, 4, 64}})
    ->ArgNames({"mode", "max_MiB"})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
