// The thread pool and concurrent use of cpu::run from many threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu_kernel_test_util.h"
#include "kernels/parallel.h"

namespace ember::test {
namespace {

TEST(CpuParallel, CoversTheRangeExactlyOnce) {
  const int64_t n = 1'000'003;
  std::vector<std::atomic<int>> hits(n);
  detail::parallel_for(0, n, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(CpuParallel, RethrowsTheChunkException) {
  EXPECT_THROW(detail::parallel_for(0, 1'000'000, 10,
                                    [](int64_t b, int64_t e) {
                                      if (b <= 500'000 && 500'000 < e) throw std::runtime_error("chunk failed");
                                    }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  detail::parallel_for(0, 100'000, 10, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 100'000);
}

TEST(CpuParallel, NestedRegionsRunInline) {
  std::atomic<int64_t> total{0};
  detail::parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      detail::parallel_for(0, 10'000, 10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 64 * 10'000);
}

TEST(CpuParallel, ManyThreadsRunLargeKernelsAtOnce) {
  // Like emulated stream workers: every thread calls cpu::run on large ops at once.
  const int threads = 8, rounds = 10;
  const int64_t n = 1 << 20;
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> a(n, static_cast<float>(t)), b(n, 1.0f), out(n);
      std::vector<double> sum(1);
      for (int r = 0; r < rounds; ++r) {
        run(call(OpKind::Add, {arg(out, {n})}, {arg(a, {n}), arg(b, {n})}, r));
        KernelCall s = call(OpKind::Sum, {arg(sum, {})}, {arg(out, {n})});
        run(s);
        if (sum[0] != static_cast<double>(n) * (t + r)) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace ember::test
