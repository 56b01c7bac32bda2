// The caching pinned host allocator: size classes, reuse only after the copies that
// used a block have completed, stats, and out-of-memory handling.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ember/errors.h"
#include "memory/caching_host_allocator.h"
#include "test_caching_allocator_fake_backend.h"

namespace ember::testing {
namespace {

class PinnedAllocatorTest : public ::testing::Test {
 protected:
  FakeBackend backend_{1, size_t{1} << 30, /*pinned_limit=*/size_t{1} << 20};
  detail::CachingHostAllocator pinned_{backend_};
  detail::StreamRef stream_{backend_.create_stream(0, 0), 7, 0};
  int64_t stat(const std::string& key) const { return pinned_.stats().at(key); }
  /// A non_blocking host-to-device copy from `host` on the stream, still queued.
  void queue_copy_from(void* host, size_t bytes) {
    backend_.copy(reinterpret_cast<void*>(uintptr_t{1} << 44), host, bytes, detail::CopyKind::HostToDevice,
                  /*host_pinned=*/true, stream_.native);
  }
};

TEST_F(PinnedAllocatorTest, ZeroBytesIsNull) {
  EXPECT_EQ(pinned_.malloc(0), nullptr);
  pinned_.free(nullptr);
  EXPECT_EQ(stat("num_host_alloc"), 0);
}

TEST_F(PinnedAllocatorTest, SizesRoundUpToPowersOfTwo) {
  void* a = pinned_.malloc(1000);
  EXPECT_EQ(stat("allocated_bytes.current"), 1024);
  EXPECT_EQ(stat("reserved_bytes.current"), 1024);
  std::memset(a, 0xab, 1000);  // real, writable host memory
  void* b = pinned_.malloc(1025);
  EXPECT_EQ(stat("allocated_bytes.current"), 1024 + 2048);
  EXPECT_EQ(stat("segment.current"), 2);
  pinned_.free(a);
  pinned_.free(b);
  EXPECT_EQ(stat("allocation.current"), 0);
  EXPECT_EQ(stat("reserved_bytes.current"), 1024 + 2048);  // cached
}

TEST_F(PinnedAllocatorTest, FreedBlockIsReusedForItsSizeClass) {
  void* a = pinned_.malloc(1000);
  pinned_.free(a);
  EXPECT_EQ(pinned_.malloc(600), a);  // same 1 KiB class
  EXPECT_EQ(stat("num_host_alloc"), 1);
  void* b = pinned_.malloc(300);  // 512 B class: a new block
  EXPECT_NE(b, a);
  EXPECT_EQ(stat("num_host_alloc"), 2);
}

TEST_F(PinnedAllocatorTest, BlockIsReusedOnlyAfterItsPendingCopyCompletes) {
  void* a = pinned_.malloc(4096);
  queue_copy_from(a, 4096);
  pinned_.record_stream(a, stream_);
  pinned_.free(a);
  void* b = pinned_.malloc(4096);
  EXPECT_NE(b, a) << "the queued copy still reads a";
  EXPECT_FALSE(backend_.query(stream_.native)) << "malloc must poll, never wait";
  backend_.synchronize(stream_.native);
  EXPECT_EQ(pinned_.malloc(4096), a);
  EXPECT_EQ(backend_.live_events, 0);
  pinned_.free(b);
}

TEST_F(PinnedAllocatorTest, WithoutRecordStreamTheBlockIsReusedAtOnce) {
  void* a = pinned_.malloc(4096);
  pinned_.free(a);
  EXPECT_EQ(pinned_.malloc(4096), a);
}

TEST_F(PinnedAllocatorTest, RecordStreamOfAForeignPointerIsAValueError) {
  int local = 0;
  EXPECT_THROW(pinned_.record_stream(&local, stream_), ValueError);
}

TEST_F(PinnedAllocatorTest, OutOfPinnedMemoryReleasesTheCacheAndRetries) {
  void* a = pinned_.malloc(512 * 1024);
  pinned_.free(a);                        // cached: 512 KiB of the 1 MiB limit
  void* b = pinned_.malloc(1024 * 1024);  // needs the cache back
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(stat("num_host_free"), 1);
  EXPECT_THAT([&] { pinned_.malloc(1); }, ::testing::Throws<OutOfMemoryError>());
  EXPECT_THROW(pinned_.malloc(size_t{1} << 63), OutOfMemoryError);
  EXPECT_EQ(stat("allocation.current"), 1);
  pinned_.free(b);
  void* c = pinned_.malloc(1);
  EXPECT_NE(c, nullptr);
  pinned_.free(c);
}

TEST_F(PinnedAllocatorTest, OutOfMemoryReportsTheRequestedSize) {
  void* a = pinned_.malloc(512 * 1024);
  // 600 KiB rounds up to a 1 MiB block, which does not fit beside `a`.
  try {
    pinned_.malloc(600 * 1024);
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_THAT(e.what(),
                ::testing::StartsWith("CUDA out of memory. Tried to allocate 600.00 KiB of pinned host memory"));
  }
  pinned_.free(a);
}

TEST_F(PinnedAllocatorTest, EmptyCacheKeepsBlocksWithPendingCopies) {
  void* a = pinned_.malloc(4096);
  void* b = pinned_.malloc(8192);
  queue_copy_from(a, 4096);
  pinned_.record_stream(a, stream_);
  pinned_.free(a);
  pinned_.free(b);
  pinned_.empty_cache();
  EXPECT_EQ(stat("reserved_bytes.current"), 4096);  // a's copy is still queued
  backend_.synchronize(stream_.native);
  pinned_.empty_cache();
  EXPECT_EQ(stat("reserved_bytes.current"), 0);
  EXPECT_EQ(stat("num_host_free"), 2);
}

TEST_F(PinnedAllocatorTest, StatsKeys) {
  const auto stats = pinned_.stats();
  for (const char* name : {"allocation", "segment", "allocated_bytes", "reserved_bytes"})
    for (const char* field : {"current", "peak", "allocated", "freed"})
      EXPECT_TRUE(stats.count(std::string(name) + "." + field)) << name << "." << field;
  EXPECT_TRUE(stats.count("num_host_alloc"));
  EXPECT_TRUE(stats.count("num_host_free"));
}

}  // namespace
}  // namespace ember::testing
