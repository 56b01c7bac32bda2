// Caching allocator policy: rounding, pools, best fit, splitting and merging, stream binding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "memory/alloc_conf.h"
#include "test_caching_allocator_fixture.h"

namespace ember::testing {
namespace {

char* bytes_of(void* ptr) { return static_cast<char*>(ptr); }

TEST_P(CachingAllocatorTest, ZeroBytesIsNullAndTouchesNothing) {
  EXPECT_EQ(alloc().malloc(0, s0), nullptr);
  alloc().free(nullptr);
  EXPECT_EQ(stat("allocation.all.allocated"), 0);
  EXPECT_EQ(stat("segment.all.current"), 0);
}

TEST_P(CachingAllocatorTest, SmallRequestsRoundTo512AndShareATwoMiBSegment) {
  void* a = alloc().malloc(1, s0);
  EXPECT_EQ(stat("allocated_bytes.all.current"), 512);
  EXPECT_EQ(stat("allocated_bytes.small_pool.current"), 512);
  EXPECT_EQ(stat("requested_bytes.all.current"), 1);
  EXPECT_EQ(stat("reserved_bytes.small_pool.current"), int64_t(2 * MiB));
  EXPECT_EQ(stat("segment.small_pool.current"), 1);
  EXPECT_EQ(stat("segment.large_pool.current"), 0);

  void* b = alloc().malloc(513, s0);
  EXPECT_EQ(bytes_of(b), bytes_of(a) + 512);  // carved from the same segment, right after a
  EXPECT_EQ(stat("allocated_bytes.all.current"), 512 + 1024);

  void* c = alloc().malloc(1 * MiB, s0);  // the largest small request still fits the segment
  EXPECT_EQ(bytes_of(c), bytes_of(b) + 1024);
  EXPECT_EQ(stat("segment.all.current"), 1);
  EXPECT_EQ(stat("num_device_alloc"), 1);
  for (void* p : {a, b, c}) alloc().free(p);
  EXPECT_EQ(stat("allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(2 * MiB));  // cached, not returned
}

struct LargeCase {
  size_t request, block, segment;
};

TEST_P(CachingAllocatorTest, LargePoolSegmentSizes) {
  const LargeCase cases[] = {
      {1 * MiB + 1, 1 * MiB + 512, 20 * MiB},       // just over small: from a 20 MiB segment
      {10 * MiB - 1000, 10 * MiB - 512, 20 * MiB},  // still below 10 MiB
      {10 * MiB, 10 * MiB, 10 * MiB},               // from 10 MiB: the request rounded to 2 MiB
      {11 * MiB, 12 * MiB, 12 * MiB},               // 1 MiB rest is not worth a split
      {13 * MiB + 1, 14 * MiB, 14 * MiB},           // nor is a rest under 1 MiB
  };
  for (const LargeCase& c : cases) {
    use(64 * MiB);
    void* p = alloc().malloc(c.request, s0);
    EXPECT_EQ(stat("allocated_bytes.large_pool.current"), int64_t(c.block)) << c.request;
    EXPECT_EQ(stat("reserved_bytes.large_pool.current"), int64_t(c.segment)) << c.request;
    EXPECT_EQ(stat("requested_bytes.large_pool.current"), int64_t(c.request)) << c.request;
    EXPECT_EQ(stat("allocated_bytes.small_pool.current"), 0);
    alloc().free(p);
  }
}

TEST_P(CachingAllocatorTest, SplitBlocksMergeBackWithFreeNeighbours) {
  void* a = alloc().malloc(4 * KiB, s0);
  void* b = alloc().malloc(4 * KiB, s0);
  void* c = alloc().malloc(4 * KiB, s0);
  ASSERT_EQ(bytes_of(b), bytes_of(a) + 4 * KiB);
  ASSERT_EQ(bytes_of(c), bytes_of(b) + 4 * KiB);
  EXPECT_EQ(stat("inactive_split.all.current"), 1);  // the segment's tail
  EXPECT_EQ(stat("inactive_split_bytes.all.current"), int64_t(2 * MiB - 12 * KiB));

  alloc().free(b);  // both neighbours in use: no merge
  EXPECT_EQ(stat("inactive_split.all.current"), 2);
  EXPECT_EQ(stat("inactive_split_bytes.all.current"), int64_t(2 * MiB - 8 * KiB));
  alloc().free(a);  // merges with b
  EXPECT_EQ(stat("inactive_split.all.current"), 2);
  alloc().free(c);  // merges a+b, c and the tail into the whole segment
  EXPECT_EQ(stat("inactive_split.all.current"), 0);
  EXPECT_EQ(stat("inactive_split_bytes.all.current"), 0);

  EXPECT_EQ(alloc().malloc(1 * MiB, s0), a);  // the merged block serves a larger request
  EXPECT_EQ(stat("num_device_alloc"), 1);
}

TEST_P(CachingAllocatorTest, LargeBlocksSplitAndMerge) {
  void* x = alloc().malloc(5 * MiB, s0);
  void* y = alloc().malloc(5 * MiB, s0);
  EXPECT_EQ(bytes_of(y), bytes_of(x) + 5 * MiB);
  EXPECT_EQ(stat("segment.large_pool.current"), 1);
  alloc().free(x);
  alloc().free(y);
  EXPECT_EQ(stat("inactive_split.large_pool.current"), 0);
  EXPECT_EQ(alloc().malloc(15 * MiB, s0), x);
  EXPECT_EQ(stat("num_device_alloc"), 1);
}

TEST_P(CachingAllocatorTest, BestFitPrefersTheSmallestBlockThatFits) {
  void* big = alloc().malloc(6 * MiB, s0);
  void* sep1 = alloc().malloc(1 * MiB + 512, s0);
  void* small = alloc().malloc(3 * MiB, s0);
  void* sep2 = alloc().malloc(1 * MiB + 512, s0);
  alloc().free(big);
  alloc().free(small);
  EXPECT_EQ(alloc().malloc(2 * MiB, s0), small);  // 3 MiB hole, not the 6 MiB one
  (void)sep1, (void)sep2;
}

TEST_P(CachingAllocatorTest, SameStreamReusesTheFreedBlock) {
  void* p = alloc().malloc(1000, s0);
  alloc().free(p);
  EXPECT_EQ(alloc().malloc(1000, s0), p);
  EXPECT_EQ(stat("num_device_alloc"), 1);
}

TEST_P(CachingAllocatorTest, NoReuseAcrossStreams) {
  void* p = alloc().malloc(1000, s0);
  alloc().free(p);
  void* q = alloc().malloc(1000, s1);
  EXPECT_NE(q, p);
  EXPECT_EQ(stat("segment.all.current"), 2);
  EXPECT_EQ(stat("num_device_alloc"), 2);
}

TEST_P(CachingAllocatorTest, RecordStreamDefersReuseUntilTheStreamsWorkCompletes) {
  void* p = alloc().malloc(4 * KiB, s0);
  alloc().record_stream(p, s1);
  keep_busy(s1);  // s1 still uses p
  alloc().free(p);
  EXPECT_EQ(stat("allocation.all.current"), 0);
  EXPECT_EQ(stat("active.all.current"), 1);  // pending free
  EXPECT_EQ(stat("active_bytes.all.current"), int64_t(4 * KiB));

  void* q = alloc().malloc(4 * KiB, s0);
  EXPECT_NE(q, p);
  EXPECT_FALSE(backend_->query(s1.native)) << "malloc must poll, never wait for s1";
  alloc().free(q);

  finish(s1);
  EXPECT_EQ(alloc().malloc(4 * KiB, s0), p);  // now merged back and reused
  EXPECT_EQ(stat("active.all.current"), 1);
  EXPECT_EQ(stat("num_sync_all_streams"), 0);
}

TEST_P(CachingAllocatorTest, RecordStreamOnTheAllocationStreamChangesNothing) {
  void* p = alloc().malloc(4 * KiB, s0);
  alloc().record_stream(p, s0);
  keep_busy(s0);
  alloc().free(p);
  EXPECT_EQ(alloc().malloc(4 * KiB, s0), p);  // ordered by s0 itself
}

TEST_P(CachingAllocatorTest, RecordStreamOfAnUnknownPointerIsAValueError) {
  int local = 0;
  EXPECT_THROW(alloc().record_stream(&local, s1), ValueError);
  alloc().record_stream(nullptr, s1);
}

TEST_P(CachingAllocatorTest, RoundupPower2Divisions) {
  use(64 * MiB, detail::parse_alloc_conf("roundup_power2_divisions:4"));
  void* a = alloc().malloc(1300000, s0);  // [1 MiB, 2 MiB) in steps of 256 KiB
  EXPECT_EQ(stat("allocated_bytes.all.current"), 1310720);
  void* b = alloc().malloc(4500, s0);  // [4 KiB, 8 KiB) in steps of 1 KiB, not 512 B
  EXPECT_EQ(stat("allocated_bytes.small_pool.current"), 5120);
  alloc().free(a);
  alloc().free(b);
}

TEST_P(CachingAllocatorTest, MaxSplitSizeKeepsOversizeBlocksWhole) {
  use(256 * MiB, detail::parse_alloc_conf("max_split_size_mb:40"));
  EXPECT_EQ(stat("max_split_size"), int64_t(40 * MiB));
  void* a = alloc().malloc(50 * MiB, s0);
  EXPECT_EQ(stat("oversize_allocations.current"), 1);
  EXPECT_EQ(stat("oversize_segments.current"), 1);
  alloc().free(a);
  EXPECT_EQ(stat("oversize_allocations.current"), 0);

  void* b = alloc().malloc(45 * MiB, s0);  // oversize request: reuses within 20 MiB, unsplit
  EXPECT_EQ(b, a);
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(50 * MiB));
  alloc().free(b);
  void* c = alloc().malloc(20 * MiB, s0);  // a normal request never takes an oversize block
  EXPECT_NE(c, a);
  EXPECT_EQ(stat("segment.all.current"), 2);
  alloc().free(c);
}

TEST_P(CachingAllocatorTest, DefaultMaxSplitSizeIsReportedAsMinusOne) { EXPECT_EQ(stat("max_split_size"), -1); }

TEST_P(CachingAllocatorTest, WithoutCachingEveryFreeReturnsTheSegment) {
  detail::AllocatorConfig config;
  config.caching_enabled = false;
  use(64 * MiB, config);
  void* a = alloc().malloc(1000, s0);
  void* b = alloc().malloc(1000, s0);
  EXPECT_EQ(stat("segment.all.current"), 2);
  EXPECT_EQ(stat("reserved_bytes.all.current"), 2048);  // exactly the rounded requests
  alloc().free(a);
  EXPECT_EQ(stat("reserved_bytes.all.current"), 1024);
  EXPECT_EQ(stat("num_device_free"), 1);
  alloc().record_stream(b, s1);
  keep_busy(s1);
  alloc().free(b);  // still waits for s1 before the memory goes back
  EXPECT_EQ(stat("segment.all.current"), 1);
  finish(s1);
  alloc().empty_cache();
  EXPECT_EQ(stat("segment.all.current"), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, CachingAllocatorTest,
                         ::testing::Values(fake_backend_maker(), emulated_backend_maker()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ember::testing
