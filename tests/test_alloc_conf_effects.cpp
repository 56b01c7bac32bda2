// What the PYTORCH_ALLOC_CONF keys added for PyTorch 2.x do to the caching allocator
// (the parsing is tests/test_alloc_conf.cpp): max_non_split_rounding_mb widens which
// cached oversize blocks a large request may take whole, release_lock_on_cudamalloc lets
// other threads use the allocator during a raw allocation, per_process_memory_fraction
// caps a new allocator; apply_settings (set_allocator_settings) changes a running one.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "ember/errors.h"
#include "memory/alloc_conf.h"
#include "memory/caching_allocator.h"
#include "memory/caching_host_allocator.h"
#include "test_caching_allocator_fake_backend.h"

namespace ember::testing {
namespace {

constexpr size_t MiB = size_t{1} << 20;

struct Device {
  explicit Device(const std::string& conf) : backend(1, size_t{8} << 30) {
    allocator = std::make_unique<detail::CachingAllocator>(backend, 0, detail::parse_alloc_conf(conf));
    stream = {backend.default_stream(0), 0, 0};
  }
  int64_t stat(const std::string& key) const { return allocator->stats().to_map().at(key); }

  FakeBackend backend;
  std::unique_ptr<detail::CachingAllocator> allocator;
  detail::StreamRef stream;
};

// A 120 MiB oversize block is cached; a 50 MiB request (itself oversize) takes it whole
// only when 120 < 50 + max_non_split_rounding_mb: not with the default 20 MiB, yes with 100.
void* reuse_of_oversize_block(Device& device) {
  void* big = device.allocator->malloc(120 * MiB, device.stream);
  device.allocator->free(big);
  void* request = device.allocator->malloc(50 * MiB, device.stream);
  const bool reused = request == big;
  device.allocator->free(request);
  return reused ? big : nullptr;
}

TEST(AllocConfEffects, MaxNonSplitRoundingLetsALargeRequestTakeALargerOversizeBlock) {
  Device defaults("max_split_size_mb:40");
  EXPECT_EQ(reuse_of_oversize_block(defaults), nullptr);
  EXPECT_EQ(defaults.stat("num_device_alloc"), 2);  // a 50 MiB segment of its own
  EXPECT_EQ(defaults.stat("reserved_bytes.all.current"), static_cast<int64_t>(170 * MiB));

  Device rounding("max_split_size_mb:40,max_non_split_rounding_mb:100");
  EXPECT_NE(reuse_of_oversize_block(rounding), nullptr);
  EXPECT_EQ(rounding.stat("num_device_alloc"), 1);
  EXPECT_EQ(rounding.stat("reserved_bytes.all.current"), static_cast<int64_t>(120 * MiB));
  // Whole: an oversize block is never split, so the request held all 120 MiB.
  EXPECT_EQ(rounding.stat("allocated_bytes.all.peak"), static_cast<int64_t>(120 * MiB));

  // The limit is exclusive, as PyTorch's: 70 + 50 is not below 120.
  Device exact("max_split_size_mb:40,max_non_split_rounding_mb:70");
  EXPECT_EQ(reuse_of_oversize_block(exact), nullptr);
}

// During the raw allocation of one thread, another thread's allocator call (here: reading
// the statistics, which takes the allocator's mutex) goes through with
// release_lock_on_cudamalloc:True. It sees the state before the new segment.
TEST(AllocConfEffects, ReleaseLockOnCudaMallocLetsOtherThreadsInDuringARawAllocation) {
  Device device("release_lock_on_cudamalloc:True");
  int64_t reserved_seen = -1;
  device.backend.on_raw_alloc = [&] {
    std::thread other([&] { reserved_seen = device.stat("reserved_bytes.all.current"); });
    other.join();
  };
  void* ptr = device.allocator->malloc(1 * MiB, device.stream);
  device.backend.on_raw_alloc = nullptr;
  EXPECT_EQ(reserved_seen, 0);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(2 * MiB));
  device.allocator->free(ptr);
}

// Without it (the default), the allocator holds its mutex through the raw allocation:
// another thread's call waits until the allocation is done and sees its segment.
TEST(AllocConfEffects, WithoutReleaseLockOtherThreadsWaitForTheRawAllocation) {
  Device device("release_lock_on_cudamalloc:False");
  std::thread other;
  int64_t reserved_seen = -1;
  device.backend.on_raw_alloc = [&] {
    other = std::thread([&] { reserved_seen = device.stat("reserved_bytes.all.current"); });
  };
  void* ptr = device.allocator->malloc(1 * MiB, device.stream);
  other.join();
  device.backend.on_raw_alloc = nullptr;
  EXPECT_EQ(reserved_seen, static_cast<int64_t>(2 * MiB));
  device.allocator->free(ptr);
}

// The fake device has 8 GiB: a quarter of it is the cap from the start.
TEST(AllocConfEffects, PerProcessMemoryFractionCapsTheAllocatorItIsMadeWith) {
  Device capped("per_process_memory_fraction:0.25");
  void* fits = capped.allocator->malloc(size_t{2} << 30, capped.stream);
  EXPECT_THROW(capped.allocator->malloc(1 * MiB, capped.stream), OutOfMemoryError);
  capped.allocator->free(fits);
  Device uncapped("");
  void* big = uncapped.allocator->malloc(size_t{4} << 30, uncapped.stream);
  uncapped.allocator->free(big);
}

// A running allocator takes new tunables at once; PYTORCH_NO_CUDA_MEMORY_CACHING is not
// one of them and stays.
TEST(AllocConfEffects, ApplySettingsChangesARunningAllocator) {
  Device device("max_split_size_mb:40");
  detail::AllocatorConfig uncached = detail::parse_alloc_conf("");
  uncached.caching_enabled = false;
  device.allocator->apply_settings(detail::parse_alloc_conf("max_split_size_mb:100,roundup_power2_divisions:4"));
  EXPECT_EQ(device.stat("max_split_size"), static_cast<int64_t>(100 * MiB));
  void* rounded = device.allocator->malloc(5 * MiB + 1, device.stream);
  EXPECT_EQ(device.stat("allocated_bytes.all.current"), static_cast<int64_t>(6 * MiB));
  device.allocator->free(rounded);
  device.allocator->apply_settings(uncached);
  void* cached = device.allocator->malloc(5 * MiB + 1, device.stream);
  EXPECT_EQ(device.stat("allocated_bytes.all.current"), static_cast<int64_t>(5 * MiB + 512));
  device.allocator->free(cached);
  EXPECT_EQ(device.stat("max_split_size"), -1);
  EXPECT_EQ(device.stat("num_device_alloc"), 1);  // still caching: the 20 MiB segment serves both
}

// pinned_use_background_threads: the allocator's thread notices that a freed block's
// stream is done; without it, only the next malloc does.
TEST(AllocConfEffects, PinnedBackgroundThreadsProcessEventsWithoutAMalloc) {
  for (bool background : {false, true}) {
    FakeBackend backend(1, size_t{1} << 30);
    detail::CachingHostAllocator pinned(backend, /*use_host_register=*/false, 1, background);
    const detail::StreamRef stream{backend.default_stream(0), 0, 0};
    void* ptr = pinned.malloc(4096);
    pinned.record_stream(ptr, stream);
    backend.sleep(stream.native, std::chrono::nanoseconds(1));  // queued work using the block
    pinned.free(ptr);
    ASSERT_TRUE(pinned.wait_for_background_pass()) << "the background thread did not poll within 30 s";
    EXPECT_EQ(pinned.pending_frees(), 1u) << background;  // the stream has not run yet
    backend.synchronize(stream.native);
    ASSERT_TRUE(pinned.wait_for_background_pass()) << "the background thread did not poll within 30 s";
    EXPECT_EQ(pinned.pending_frees(), background ? 0u : 1u) << background;
    void* again = pinned.malloc(4096);  // without the thread, this malloc polls
    EXPECT_EQ(again, ptr) << background;
    EXPECT_EQ(pinned.pending_frees(), 0u) << background;
    EXPECT_EQ(pinned.stats().at("num_host_alloc"), 1) << background;
    pinned.free(again);
  }
}

}  // namespace
}  // namespace ember::testing
