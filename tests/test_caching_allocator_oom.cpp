// Caching allocator under memory pressure: free-and-retry, OutOfMemoryError, huge
// requests, empty_cache, the per-process memory fraction and garbage collection.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "memory/alloc_conf.h"
#include "test_caching_allocator_fixture.h"

namespace ember::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string oom_message(detail::CachingAllocator& allocator, size_t bytes, detail::StreamRef stream) {
  try {
    allocator.malloc(bytes, stream);
  } catch (const OutOfMemoryError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no OutOfMemoryError for " << bytes << " bytes";
  return "";
}

TEST_P(CachingAllocatorTest, FailedAllocationFreesTheCacheAndRetriesOnce) {
  void* a = alloc().malloc(40 * MiB, s0);
  alloc().free(a);                         // 40 MiB cached for s0
  void* b = alloc().malloc(50 * MiB, s1);  // s1 cannot use it; only 24 MiB left on the device
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(stat("num_alloc_retries"), 1);
  EXPECT_EQ(stat("num_device_free"), 1);
  EXPECT_EQ(stat("num_sync_all_streams"), 1);
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(50 * MiB));
  EXPECT_EQ(stat("num_ooms"), 0);
  alloc().free(b);
}

TEST_P(CachingAllocatorTest, OutOfMemoryErrorNamesTheSizesAndLeavesTheAllocatorUsable) {
  void* a = alloc().malloc(50 * MiB, s0);
  EXPECT_THAT(oom_message(alloc(), 30 * MiB, s0),
              StartsWith("CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 64.00 MiB "
                         "of which 14.00 MiB is free. Of the allocated memory 50.00 MiB is allocated by ember, and "
                         "0 bytes is reserved by ember but unallocated."));
  EXPECT_EQ(stat("num_ooms"), 1);
  EXPECT_EQ(stat("num_alloc_retries"), 1);
  EXPECT_EQ(stat("allocation.all.current"), 1);
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(50 * MiB));
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(50 * MiB));

  void* small = alloc().malloc(4 * KiB, s0);  // normal service continues
  EXPECT_NE(small, nullptr);
  alloc().free(small);
  alloc().free(a);
  void* c = alloc().malloc(30 * MiB, s0);
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(30 * MiB));
  alloc().free(c);
}

TEST_P(CachingAllocatorTest, OutOfMemoryReportsReservedButUnallocatedMemory) {
  void* a = alloc().malloc(5 * MiB, s0);  // holds a 20 MiB segment, 15 MiB of it cached
  EXPECT_THAT(oom_message(alloc(), 50 * MiB, s0),
              HasSubstr("of which 44.00 MiB is free. Of the allocated memory 5.00 MiB is allocated by ember, and "
                        "15.00 MiB is reserved by ember but unallocated."));
  alloc().free(a);
}

TEST_P(CachingAllocatorTest, HugeRequestsAreOutOfMemoryErrors) {
  EXPECT_THAT(oom_message(alloc(), size_t{1'000'000'000'000'000'000}, s0),
              StartsWith("CUDA out of memory. Tried to allocate "));
  EXPECT_THROW(alloc().malloc(std::numeric_limits<size_t>::max(), s0), OutOfMemoryError);
  EXPECT_THROW(alloc().malloc(std::numeric_limits<size_t>::max() - 100, s0), OutOfMemoryError);
  EXPECT_EQ(stat("num_ooms"), 3);
  EXPECT_EQ(stat("allocation.all.current"), 0);
  void* p = alloc().malloc(1000, s0);
  EXPECT_NE(p, nullptr);
  alloc().free(p);
}

TEST_P(CachingAllocatorTest, EmptyCacheReleasesOnlyUnusedSegments) {
  void* a = alloc().malloc(5 * MiB, s0);   // 20 MiB segment
  void* b = alloc().malloc(16 * MiB, s0);  // too big for a's 15 MiB rest: own 16 MiB segment
  alloc().free(b);
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(36 * MiB));
  alloc().empty_cache();
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(20 * MiB));  // a's segment is in use
  EXPECT_EQ(stat("allocated_bytes.all.current"), int64_t(5 * MiB));
  EXPECT_EQ(stat("num_device_free"), 1);
  EXPECT_EQ(stat("num_sync_all_streams"), 1);
  alloc().free(a);
  alloc().empty_cache();
  EXPECT_EQ(stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(stat("segment.all.current"), 0);
  EXPECT_EQ(stat("num_sync_all_streams"), 2);
  EXPECT_EQ(backend_->mem_get_info(0).first, 64 * MiB);
}

TEST_P(CachingAllocatorTest, EmptyCacheWaitsForDeferredFrees) {
  void* p = alloc().malloc(4 * KiB, s0);
  alloc().record_stream(p, s1);
  keep_busy(s1);
  alloc().free(p);
  alloc().empty_cache();
  EXPECT_TRUE(backend_->query(s1.native));
  EXPECT_EQ(stat("active.all.current"), 0);
  EXPECT_EQ(stat("reserved_bytes.all.current"), 0);
}

TEST_P(CachingAllocatorTest, MemoryFractionCapsReservedMemory) {
  alloc().set_memory_fraction(0.5);
  EXPECT_THAT(oom_message(alloc(), 40 * MiB, s0),
              HasSubstr("This process has a memory allocation limit of 32.00 MiB."));
  void* a = alloc().malloc(30 * MiB, s0);
  EXPECT_THAT(oom_message(alloc(), 4 * MiB, s1), HasSubstr("Tried to allocate 20.00 MiB"));
  alloc().free(a);
  alloc().set_memory_fraction(1.0);
  void* b = alloc().malloc(4 * MiB, s1);
  alloc().free(b);
}

TEST_P(CachingAllocatorTest, BadMemoryFractionIsAValueError) {
  try {
    alloc().set_memory_fraction(1.5);
    FAIL();
  } catch (const ValueError& error) {
    EXPECT_STREQ(error.what(), "Invalid fraction value: 1.5. Allowed range: 0~1");
  }
  EXPECT_THROW(alloc().set_memory_fraction(-0.1), ValueError);
  EXPECT_THROW(alloc().set_memory_fraction(std::numeric_limits<double>::quiet_NaN()), ValueError);
  void* p = alloc().malloc(60 * MiB, s0);  // no limit was set
  alloc().free(p);
}

TEST_P(CachingAllocatorTest, GarbageCollectionReclaimsTheOldestCachedSegments) {
  use(64 * MiB, detail::parse_alloc_conf("garbage_collection_threshold:0.5"));
  alloc().set_memory_fraction(1.0);  // GC works against the allowed maximum
  void* a = alloc().malloc(20 * MiB, s0);
  void* b = alloc().malloc(20 * MiB, s0);
  alloc().free(a);
  alloc().free(b);
  void* c = alloc().malloc(12 * MiB, s1);  // 40 MiB reserved > 32 MiB threshold
  EXPECT_EQ(stat("num_device_free"), 1);   // only a's segment was needed to get under it
  EXPECT_EQ(stat("num_alloc_retries"), 0);
  EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(32 * MiB));
  EXPECT_EQ(alloc().malloc(20 * MiB, s0), b);  // the younger segment is still cached
  alloc().free(c);
}

TEST_P(CachingAllocatorTest, WithoutGarbageCollectionCachedSegmentsStay) {
  alloc().set_memory_fraction(1.0);
  void* a = alloc().malloc(20 * MiB, s0);
  void* b = alloc().malloc(20 * MiB, s0);
  alloc().free(a);
  alloc().free(b);
  void* c = alloc().malloc(12 * MiB, s1);
  EXPECT_EQ(stat("num_device_free"), 0);
  alloc().free(c);
}

INSTANTIATE_TEST_SUITE_P(Backends, CachingAllocatorTest,
                         ::testing::Values(fake_backend_maker(), emulated_backend_maker()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ember::testing
