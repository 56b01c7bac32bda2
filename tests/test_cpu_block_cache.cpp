// The cpu allocator's block cache (Note [Cpu block cache] in src/core/storage.cpp): a
// freed block of 128 KiB or more serves the next request of the same rounded size; live
// blocks are never shared; small blocks and other sizes are not taken from it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "memory/memory.h"

namespace ember::testing {
namespace {

using detail::cpu_allocator;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;  // AddressSanitizer must see every free
#else
constexpr bool kCaching = true;
#endif

TEST(CpuBlockCache, AFreedLargeBlockServesTheNextRequestOfItsSize) {
  if (!kCaching) GTEST_SKIP() << "the block cache is off under AddressSanitizer";
  void* first = cpu_allocator().allocate(3 << 20);
  ASSERT_NE(first, nullptr);
  std::memset(first, 1, 3 << 20);
  cpu_allocator().deallocate(first);
  // Same size class (rounded up to 16 KiB): the same block comes back.
  void* second = cpu_allocator().allocate((3 << 20) - 100);
  EXPECT_EQ(second, first);
  cpu_allocator().deallocate(second);
}

TEST(CpuBlockCache, LiveBlocksAreNeverShared) {
  std::vector<void*> blocks;
  std::set<uintptr_t> seen;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      void* p = cpu_allocator().allocate(256 << 10);
      ASSERT_NE(p, nullptr);
      std::memset(p, i, 256 << 10);
      blocks.push_back(p);
    }
    for (void* p : blocks) EXPECT_TRUE(seen.insert(reinterpret_cast<uintptr_t>(p)).second);
    for (void* p : blocks) cpu_allocator().deallocate(p);
    blocks.clear();
    seen.clear();
  }
}

TEST(CpuBlockCache, OtherSizesAndSmallBlocksAreNotTakenFromIt) {
  void* large = cpu_allocator().allocate(2 << 20);
  cpu_allocator().deallocate(large);
  void* other = cpu_allocator().allocate(4 << 20);
  EXPECT_NE(other, large);
  void* small = cpu_allocator().allocate(4096);
  EXPECT_NE(small, large);
  std::memset(small, 0, 4096);
  cpu_allocator().deallocate(small);
  cpu_allocator().deallocate(other);
}

TEST(CpuBlockCache, BlocksFromConcurrentThreadsStayDistinct) {
  // Run under ThreadSanitizer in CI: the cache's bookkeeping is shared by every thread.
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      for (int r = 0; r < kRounds; ++r) {
        auto* p = static_cast<unsigned char*>(cpu_allocator().allocate(192 << 10));
        std::memset(p, t + 1, 192 << 10);
        for (size_t i = 0; i < (192 << 10); i += 4096) failures[t] += p[i] != t + 1;
        cpu_allocator().deallocate(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace ember::testing
