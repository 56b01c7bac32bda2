// Multi-threaded stress: threads x streams x random sizes over one device allocator,
// with record_stream and deferred frees, checking that live blocks never overlap and
// that the stats balance at the end. Run under TSan (EMBER_SANITIZE=thread) as well.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_caching_allocator_fixture.h"

namespace ember::testing {
namespace {

// Live [ptr, ptr + size) ranges across all threads; any overlap is an allocator bug.
class LiveRanges {
 public:
  void add(void* ptr, size_t size) {
    auto begin = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard lock(mutex_);
    auto next = ranges_.lower_bound(begin);
    if (next != ranges_.end()) {
      EXPECT_GE(next->first, begin + size) << "overlaps the next live block";
    }
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      EXPECT_LE(prev->first + prev->second, begin) << "overlaps the previous live block";
    }
    ranges_[begin] = size;
  }
  void remove(void* ptr) {
    std::lock_guard lock(mutex_);
    EXPECT_EQ(ranges_.erase(reinterpret_cast<uintptr_t>(ptr)), 1u);
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, size_t> ranges_;
};

TEST_P(CachingAllocatorTest, ThreadsStreamsAndRandomSizesKeepBlocksDisjointAndStatsBalanced) {
  use(size_t{1} << 30);
  constexpr int kThreads = 4;
  constexpr int kStreamsPerThread = 2;
  constexpr int kOps = 3000;
  std::vector<detail::StreamRef> streams;
  for (int i = 0; i < kThreads * kStreamsPerThread; ++i) streams.push_back(new_stream(100 + i));

  LiveRanges live;
  std::atomic<int64_t> mallocs{0};
  std::atomic<bool> done{false};
  // A reader polling the stats and snapshots concurrently with the writers.
  std::thread reader([&] {
    while (!done.load()) {
      detail::DeviceStats stats = alloc().stats();
      EXPECT_GE(stats.reserved_bytes[detail::kAggregate].current, stats.allocated_bytes[detail::kAggregate].current);
      (void)alloc().segments_json();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      std::vector<std::pair<void*, size_t>> mine;
      for (int op = 0; op < kOps; ++op) {
        const detail::StreamRef stream = streams[t * kStreamsPerThread + rng() % kStreamsPerThread];
        const bool allocate = mine.empty() || (mine.size() < 32 && rng() % 100 < 60);
        if (allocate) {
          // Mostly small, sometimes large, occasionally past 10 MiB.
          size_t size = rng() % 10 == 0 ? 1 + rng() % (12 * MiB) : 1 + rng() % (256 * KiB);
          void* ptr = alloc().malloc(size, stream);
          ASSERT_NE(ptr, nullptr);
          live.add(ptr, size);
          mine.emplace_back(ptr, size);
          ++mallocs;
        } else {
          size_t index = rng() % mine.size();
          auto [ptr, size] = mine[index];
          mine[index] = mine.back();
          mine.pop_back();
          if (rng() % 4 == 0) {
            // Another thread's stream uses the block too, with work still queued.
            const detail::StreamRef other = streams[rng() % streams.size()];
            alloc().record_stream(ptr, other);
            keep_busy(other, std::chrono::microseconds(50));
          }
          live.remove(ptr);
          alloc().free(ptr);
        }
        if (op % 97 == 0) finish(streams[t * kStreamsPerThread]);
        if (op % 1000 == 999 && t == 0) alloc().empty_cache();
      }
      for (auto [ptr, size] : mine) {
        live.remove(ptr);
        alloc().free(ptr);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  reader.join();

  EXPECT_EQ(stat("allocation.all.current"), 0);
  EXPECT_EQ(stat("allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat("requested_bytes.all.current"), 0);
  EXPECT_EQ(stat("allocation.all.allocated"), mallocs.load());
  alloc().empty_cache();  // waits for every deferred free
  EXPECT_EQ(stat("active.all.current"), 0);
  EXPECT_EQ(stat("inactive_split.all.current"), 0);
  EXPECT_EQ(stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(stat("segment.all.current"), 0);
  EXPECT_EQ(stat("num_device_alloc"), stat("num_device_free"));
  EXPECT_EQ(backend_->mem_get_info(0).first, size_t{1} << 30);
  if (auto* fake = dynamic_cast<FakeBackend*>(backend_.get())) {
    EXPECT_GT(fake->records, 0) << "no free was ever deferred";
    allocator_.reset();
    EXPECT_EQ(fake->live_events, 0) << "pooled events must be destroyed with the allocator";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CachingAllocatorTest,
                         ::testing::Values(fake_backend_maker(), emulated_backend_maker()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ember::testing
