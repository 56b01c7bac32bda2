// Launches on an emulated device allocate nothing in steady state, on the host thread or
// on the stream's worker (Note [Emulated queue pool] in backends/emulated/emulated_stream.h).
//
// This program replaces malloc and its family, so every heap allocation of the process
// (operator new included) is counted, per side: the thread that runs the test, and every
// other thread (the stream workers).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <future>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "emulated_support.h"

// Sanitizers replace malloc themselves: there the counter is not built and the tests skip.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EMBER_COUNT_MALLOC 0
#else
#define EMBER_COUNT_MALLOC 1
#endif

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {

[[maybe_unused]] std::atomic<bool> g_counting{false};
pthread_t g_host;
std::atomic<long> g_host_allocs{0}, g_host_frees{0}, g_worker_allocs{0}, g_worker_frees{0};

[[maybe_unused]] void note(bool allocation) {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  bool host = pthread_equal(pthread_self(), g_host) != 0;
  auto& counter = allocation ? (host ? g_host_allocs : g_worker_allocs) : (host ? g_host_frees : g_worker_frees);
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

#if EMBER_COUNT_MALLOC
extern "C" {
void* malloc(size_t n) {
  note(true);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  note(true);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  note(true);
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  note(true);
  return __libc_memalign(alignment, n);
}
void* memalign(size_t alignment, size_t n) {
  note(true);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  note(true);
  *out = __libc_memalign(alignment, n);
  return *out == nullptr ? 12 /* ENOMEM */ : 0;
}
void free(void* p) {
  if (p != nullptr) note(false);
  __libc_free(p);
}
}
#endif

namespace {

namespace cuda = ember::cuda;

struct Counts {
  long host_allocs, host_frees, worker_allocs, worker_frees;
};

Counts counted(const std::function<void()>& body) {
  g_host = pthread_self();
  g_host_allocs = g_host_frees = g_worker_allocs = g_worker_frees = 0;
  g_counting = true;
  body();
  g_counting = false;
  return {g_host_allocs.load(), g_host_frees.load(), g_worker_allocs.load(), g_worker_frees.load()};
}

const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(1, size_t{1} << 28);
  return true;
}();

constexpr int kLaunches = 10'000;
constexpr int kWindow = 100;  // launches in flight at most: the pool's steady depth

/// Grows `stream`'s queue pool to the depth the counted runs can reach. The pool grows to
/// the deepest queue it has seen, and how deep the queue gets depends on how far the worker
/// lags behind the host: the worker is held while a whole window of `launch` is queued, so
/// the depth does not depend on how the threads are scheduled.
void fill_pool(const cuda::Stream& stream, const std::function<void()>& launch) {
  std::promise<void> release;
  ember::testing::on_stream(stream, [opened = release.get_future().share()] { opened.wait(); });
  for (int i = 0; i < kWindow; ++i) launch();
  release.set_value();
  stream.synchronize();
}

TEST(EmulatedLaunchAllocations, CounterSeesHostAllocations) {
  if (!EMBER_COUNT_MALLOC) GTEST_SKIP() << "a sanitizer replaces malloc: nothing to count";
  // The counter itself works: a window of launches queued on a new stream whose worker is
  // held needs more queue entries than the stream's pool has (it never held more than two
  // before), and the host allocates them. Holding the worker makes the queue's depth, and
  // so the count, independent of how the threads are scheduled.
  cuda::Stream s;
  auto a = ember::ones({16}, "cuda:0"), b = ember::ones({16}, "cuda:0");
  s.wait_stream(cuda::current_stream());  // `a` and `b` are filled on the default stream
  std::promise<void> release;
  Counts c = counted([&] {
    ember::testing::on_stream(s, [opened = release.get_future().share()] { opened.wait(); });
    cuda::StreamGuard guard(s);
    for (int i = 0; i < kWindow; ++i) a.add_(b);
    release.set_value();
    s.synchronize();
  });
  EXPECT_GE(c.host_allocs, kWindow - 2);
  EXPECT_FLOAT_EQ(a.cpu().data_ptr<float>()[0], 1.0f + kWindow);
}

TEST(EmulatedLaunchAllocations, SteadyStateLaunchesAllocateNothing) {
  if (!EMBER_COUNT_MALLOC) GTEST_SKIP() << "a sanitizer replaces malloc: nothing to count";
  auto a = ember::zeros({16}, "cuda:0"), b = ember::ones({16}, "cuda:0");
  // The stream sanitizer (EMBER_CUDA_SANITIZER=1) records each launch's accesses on the host.
  // (Asked after the first cuda use, which reads the environment.)
  if (cuda::sanitizer::is_enabled()) GTEST_SKIP() << "the stream sanitizer records every launch";
  cuda::Stream stream = cuda::current_stream();
  auto run = [&] {
    for (int i = 1; i <= kLaunches; ++i) {
      a.add_(b);
      if (i % kWindow == 0) stream.synchronize();
    }
  };
  fill_pool(stream, [&] { a.add_(b); });
  run();  // warm-up: the allocator caches its blocks
  Counts c = counted(run);
  EXPECT_EQ(c.host_allocs, 0);
  EXPECT_EQ(c.host_frees, 0);
  EXPECT_EQ(c.worker_allocs, 0);
  EXPECT_EQ(c.worker_frees, 0);
  EXPECT_FLOAT_EQ(a.cpu().data_ptr<float>()[0], 2.0f * kLaunches + kWindow);  // every launch ran
}

TEST(EmulatedLaunchAllocations, WorkerNeverFreesWhatTheHostAllocated) {
  if (!EMBER_COUNT_MALLOC) GTEST_SKIP() << "a sanitizer replaces malloc: nothing to count";
  // An out-of-place op makes its output tensor on the host (and frees it there); the
  // worker neither allocates nor frees anything.
  auto a = ember::ones({16}, "cuda:0"), b = ember::ones({16}, "cuda:0");
  cuda::Stream stream = cuda::current_stream();
  auto run = [&] {
    for (int i = 1; i <= kLaunches; ++i) {
      ember::Tensor c = a + b;
      if (i % kWindow == 0) stream.synchronize();
    }
  };
  fill_pool(stream, [&] { ember::Tensor c = a + b; });
  run();
  Counts c = counted(run);
  EXPECT_EQ(c.worker_allocs, 0);
  EXPECT_EQ(c.worker_frees, 0);
  EXPECT_EQ(c.host_allocs, c.host_frees);  // nothing leaks from one launch to the next
  RecordProperty("host_allocations_per_op", std::to_string(static_cast<double>(c.host_allocs) / kLaunches));
  std::printf("out-of-place add: %.2f host allocations per op\n", static_cast<double>(c.host_allocs) / kLaunches);
}

}  // namespace
