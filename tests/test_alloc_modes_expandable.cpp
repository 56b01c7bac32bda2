// expandable_segments:True (Note [Expandable segments]): one growing segment per stream
// and pool on an emulated device, against fixed segments on the same workload.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ember/errors.h"
#include "memory/caching_allocator.h"
#include "runtime/backend.h"

namespace ember::testing {
namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// One allocator over device 0 of its own emulated backend.
struct Device {
  explicit Device(bool expandable, size_t capacity = size_t{1} << 30) {
    backend = detail::make_emulated_backend(capacity, {0});
    detail::AllocatorConfig config;
    config.expandable_segments = expandable;
    allocator = std::make_unique<detail::CachingAllocator>(*backend, 0, config);
    s0 = {backend->default_stream(0), 0, 0};
  }
  ~Device() {
    allocator.reset();
    for (detail::BackendStream* stream : streams) backend->destroy_stream(stream);
  }
  detail::StreamRef new_stream(uint64_t id) {
    streams.push_back(backend->create_stream(0, 0));
    return {streams.back(), id, 0};
  }
  int64_t stat(const std::string& key) const { return allocator->stats().to_map().at(key); }
  nlohmann::json segments() const { return allocator->segments_json(); }
  size_t device_used() { return backend->mem_get_info(0).second - backend->mem_get_info(0).first; }

  std::unique_ptr<detail::Backend> backend;
  std::unique_ptr<detail::CachingAllocator> allocator;
  detail::StreamRef s0;
  std::vector<detail::BackendStream*> streams;
};

// PyTorch's motivating case: the batch size changes every step, so every step allocates
// activations of a different size and frees them at its end.
void train_with_changing_batch(Device& device) {
  for (size_t batch : {3, 5, 4, 7, 6, 8}) {
    void* activations = device.allocator->malloc(batch * 4 * MiB, device.s0);
    device.allocator->free(activations);
  }
}

TEST(ExpandableSegments, ChangingBatchSizeReservesLessInFewerSegments) {
  Device fixed(false), expandable(true);
  train_with_changing_batch(fixed);
  train_with_changing_batch(expandable);
  // Fixed segments: 12 MiB, then 20, 28 and 32 MiB segments for the steps the cached ones
  // are too small for (the 16 and 24 MiB steps fit in the 20 and 28 MiB segments).
  EXPECT_EQ(fixed.stat("reserved_bytes.all.current"), static_cast<int64_t>(92 * MiB));
  EXPECT_EQ(fixed.stat("segment.all.current"), 4);
  EXPECT_EQ(fixed.stat("num_device_alloc"), 4);
  EXPECT_EQ(fixed.segments().size(), 4u);
  // Expandable: one segment of 20 MiB pages, grown once from one page to two (the 28 MiB step).
  EXPECT_EQ(expandable.stat("reserved_bytes.all.current"), static_cast<int64_t>(40 * MiB));
  EXPECT_EQ(expandable.stat("reserved_bytes.large_pool.peak"), static_cast<int64_t>(40 * MiB));
  EXPECT_EQ(expandable.stat("num_device_alloc"), 2);     // two page maps
  EXPECT_EQ(expandable.stat("segment.all.current"), 0);  // PyTorch counts only fixed segments here
  nlohmann::json segments = expandable.segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0]["total_size"], 40 * MiB);
  EXPECT_EQ(segments[0]["is_expandable"], true);
  EXPECT_EQ(segments[0]["segment_type"], "large");
  for (const auto& segment : fixed.segments()) EXPECT_EQ(segment["is_expandable"], false);
  // The device itself gave out exactly what the stats call reserved.
  EXPECT_EQ(fixed.device_used(), 92 * MiB);
  EXPECT_EQ(expandable.device_used(), 40 * MiB);
}

TEST(ExpandableSegments, EmptyCacheUnmapsFreePagesAndReleasesTheRange) {
  Device device(true);
  train_with_changing_batch(device);
  device.allocator->empty_cache();
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.stat("num_device_free"), 1);  // the one free block, both pages at once
  EXPECT_EQ(device.device_used(), 0u);
  EXPECT_TRUE(device.segments().empty());
  // The next step starts a new segment.
  void* ptr = device.allocator->malloc(4 * MiB, device.s0);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(20 * MiB));
  device.allocator->free(ptr);
}

TEST(ExpandableSegments, EmptyCacheKeepsPagesThatHoldAllocations) {
  Device device(true);
  void* a = device.allocator->malloc(30 * MiB, device.s0);  // maps two pages: [0, 40) MiB
  void* b = device.allocator->malloc(5 * MiB, device.s0);   // [30, 35) MiB, no new page
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), static_cast<ptrdiff_t>(30 * MiB));
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(40 * MiB));
  device.allocator->free(a);
  device.allocator->empty_cache();
  // Page [0, 20) MiB is free and goes; page [20, 40) holds b and stays, with its free parts.
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(20 * MiB));
  EXPECT_EQ(device.device_used(), 20 * MiB);
  nlohmann::json segments = device.segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0]["address"], reinterpret_cast<uintptr_t>(a) + 20 * MiB);
  EXPECT_EQ(segments[0]["total_size"], 20 * MiB);
  EXPECT_EQ(segments[0]["allocated_size"], 5 * MiB);
  ASSERT_EQ(segments[0]["blocks"].size(), 3u);
  EXPECT_EQ(segments[0]["blocks"][1]["state"], "active_allocated");
  // Growing again maps the page back in front of b's page, at the same addresses.
  void* c = device.allocator->malloc(15 * MiB, device.s0);
  EXPECT_EQ(c, a);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(40 * MiB));
  EXPECT_EQ(device.segments().size(), 1u);
  device.allocator->free(b);
  device.allocator->free(c);
  device.allocator->empty_cache();
  EXPECT_EQ(device.device_used(), 0u);
}

TEST(ExpandableSegments, EachStreamAndPoolGrowsItsOwnSegment) {
  Device device(true);
  detail::StreamRef s1 = device.new_stream(1);
  void* large0 = device.allocator->malloc(3 * MiB, device.s0);
  void* large1 = device.allocator->malloc(3 * MiB, s1);
  void* small0 = device.allocator->malloc(1000, device.s0);
  void* small0b = device.allocator->malloc(1 * MiB, device.s0);
  EXPECT_EQ(device.stat("reserved_bytes.large_pool.current"), static_cast<int64_t>(40 * MiB));
  EXPECT_EQ(device.stat("reserved_bytes.small_pool.current"), static_cast<int64_t>(2 * MiB));
  nlohmann::json segments = device.segments();
  ASSERT_EQ(segments.size(), 3u);
  int small = 0;
  for (const auto& segment : segments) {
    EXPECT_EQ(segment["is_expandable"], true);
    if (segment["segment_type"] == "small") {
      ++small;
      EXPECT_EQ(segment["total_size"], 2 * MiB);
      EXPECT_EQ(segment["stream"], 0u);
    }
  }
  EXPECT_EQ(small, 1);
  // The third small allocation overflows the first 2 MiB page: the segment grows in place.
  void* small0c = device.allocator->malloc(1 * MiB, device.s0);
  EXPECT_EQ(device.stat("reserved_bytes.small_pool.current"), static_cast<int64_t>(4 * MiB));
  EXPECT_EQ(device.segments().size(), 3u);
  for (void* ptr : {large0, large1, small0, small0b, small0c}) device.allocator->free(ptr);
  device.allocator->empty_cache();
  EXPECT_EQ(device.device_used(), 0u);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), 0);
}

TEST(ExpandableSegments, DeviceLimitStillRaisesOutOfMemoryWithStateIntact) {
  Device device(true, 64 * MiB);
  void* a = device.allocator->malloc(50 * MiB, device.s0);  // three 20 MiB pages
  void* b = device.allocator->malloc(10 * MiB, device.s0);  // the rest of the third page
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(60 * MiB));
  try {
    device.allocator->malloc(10 * MiB, device.s0);  // a fourth page does not fit in 64 MiB
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& error) {
    EXPECT_THAT(error.what(), ::testing::StartsWith("CUDA out of memory. Tried to allocate"));
  }
  EXPECT_EQ(device.stat("num_ooms"), 1);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(60 * MiB));
  EXPECT_EQ(device.stat("allocated_bytes.all.current"), static_cast<int64_t>(60 * MiB));
  EXPECT_EQ(device.device_used(), 60 * MiB);
  // Freeing one allocation makes room for the request.
  device.allocator->free(b);
  void* c = device.allocator->malloc(10 * MiB, device.s0);
  EXPECT_EQ(c, b);
  device.allocator->free(a);
  device.allocator->free(c);
  device.allocator->empty_cache();
  EXPECT_EQ(device.device_used(), 0u);
}

TEST(ExpandableSegments, MemoryFractionCapsMappedPages) {
  Device device(true, 100 * MiB);
  device.allocator->set_memory_fraction(0.5);  // 50 MiB: two 20 MiB pages, not three
  void* a = device.allocator->malloc(40 * MiB, device.s0);
  EXPECT_THROW(device.allocator->malloc(1 * MiB + 1, device.s0), OutOfMemoryError);
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), static_cast<int64_t>(40 * MiB));
  device.allocator->free(a);
}

TEST(ExpandableSegments, RecordedHistoryShowsMapsAndUnmaps) {
  Device device(true);
  device.allocator->record_history(true, 100);
  void* a = device.allocator->malloc(25 * MiB, device.s0);
  device.allocator->free(a);
  device.allocator->empty_cache();
  std::vector<std::string> actions;
  for (const auto& entry : device.allocator->trace_json()) actions.push_back(entry["action"]);
  EXPECT_THAT(actions,
              ::testing::ElementsAre("segment_map", "alloc", "free_requested", "free_completed", "segment_unmap"));
  EXPECT_EQ(device.allocator->trace_json()[0]["size"], 40 * MiB);
}

TEST(ExpandableSegments, ThreadsOnTheirOwnStreamsLeaveConsistentState) {
  Device device(true);
  std::vector<detail::StreamRef> streams;
  for (uint64_t id = 1; id <= 4; ++id) streams.push_back(device.new_stream(id));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < streams.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<size_t> size(1, 30 * MiB);
      std::vector<void*> live;
      for (int step = 0; step < 300; ++step) {
        if (live.size() < 4 && rng() % 3 != 0) {
          live.push_back(device.allocator->malloc(size(rng), streams[t]));
        } else if (!live.empty()) {
          device.allocator->free(live.back());
          live.pop_back();
        }
        if (step % 100 == 99) device.allocator->empty_cache();
      }
      for (void* ptr : live) device.allocator->free(ptr);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(device.stat("allocated_bytes.all.current"), 0);
  EXPECT_EQ(static_cast<size_t>(device.stat("reserved_bytes.all.current")), device.device_used());
  device.allocator->empty_cache();
  EXPECT_EQ(device.stat("reserved_bytes.all.current"), 0);
  EXPECT_EQ(device.device_used(), 0u);
  EXPECT_TRUE(device.segments().empty());
}

}  // namespace
}  // namespace ember::testing
