// The public memory API of ember::cuda and detail::cuda_allocator / pinned_allocator,
// over two emulated devices of 64 MiB.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/stream.h"
#include "memory/memory.h"
#include "runtime/stream_state.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool emulated = (ember::cuda::emulate(2, 64 * MiB), true);

ember::detail::StreamState& default_state(int device) { return *ember::cuda::default_stream(device).state(); }

}  // namespace

namespace ember::testing {
namespace {

using nlohmann::json;

TEST(MemoryApi, AllocatorsArePerDeviceAndCreatedOnce) {
  ASSERT_TRUE(emulated);
  ASSERT_EQ(cuda::backend_name(), "emulated");
  detail::Allocator* first = nullptr;
  std::vector<std::thread> threads;
  std::vector<detail::Allocator*> seen(8);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { seen[i] = &detail::cuda_allocator(i % 2); });
  for (auto& thread : threads) thread.join();
  first = seen[0];
  for (int i = 0; i < 8; ++i) EXPECT_EQ(seen[i], &detail::cuda_allocator(i % 2));
  EXPECT_NE(first, seen[1]);
  EXPECT_THROW(detail::cuda_allocator(2), IndexError);
}

TEST(MemoryApi, StatsFollowAllocationsPerDevice) {
  detail::Allocator& device0 = detail::cuda_allocator(0);
  const size_t before = cuda::memory_allocated(0);
  void* p = device0.allocate(1000);
  EXPECT_EQ(device0.allocate(0), nullptr);
  EXPECT_EQ(cuda::memory_allocated(0), before + 1024);
  EXPECT_EQ(cuda::memory_allocated(), before + 1024);  // device 0 is current
  EXPECT_EQ(cuda::memory_allocated(1), 0u);
  EXPECT_GE(cuda::memory_reserved(0), 2 * MiB);
  EXPECT_GE(cuda::max_memory_allocated(0), before + 1024);
  EXPECT_EQ(cuda::memory_stats(0).at("allocation.all.current"), 1);
  device0.deallocate(p);
  EXPECT_EQ(cuda::memory_allocated(0), before);
  cuda::reset_peak_memory_stats(0);
  EXPECT_EQ(cuda::max_memory_allocated(0), before);
  cuda::reset_accumulated_memory_stats(0);
  EXPECT_EQ(cuda::memory_stats(0).at("allocation.all.allocated"), 0);
  EXPECT_THROW(cuda::memory_allocated(7), IndexError);
}

TEST(MemoryApi, AllocationsBindToTheCurrentStream) {
  cuda::Stream side(0);
  detail::Allocator& device0 = detail::cuda_allocator(0);
  void* p = device0.allocate(4096);
  device0.deallocate(p);
  void* q = nullptr;
  {
    cuda::StreamGuard guard(side);
    q = device0.allocate(4096);
    EXPECT_NE(q, p);  // p's block belongs to the default stream
    device0.deallocate(q);
    EXPECT_EQ(device0.allocate(4096), q);
    device0.deallocate(q);
  }
  EXPECT_EQ(device0.allocate(4096), p);
  device0.record_stream(p, side.state());
  {
    cuda::StreamGuard guard(side);
    cuda::sleep(std::chrono::seconds(1));
  }
  device0.deallocate(p);
  void* r = device0.allocate(4096);
  EXPECT_NE(r, p);  // deferred until `side` finishes
  device0.deallocate(r);
  side.synchronize();
}

TEST(MemoryApi, SnapshotCoversEveryDeviceAndMatchesTheStats) {
  cuda::record_memory_history(true, 100);
  void* a = detail::cuda_allocator(1).allocate(3 * MiB);
  const json snapshot = json::parse(cuda::memory_snapshot_json());
  ASSERT_TRUE(snapshot.contains("segments"));
  ASSERT_EQ(snapshot.at("device_traces").size(), 2u);
  int64_t reserved[2] = {0, 0}, allocated[2] = {0, 0};
  for (const json& segment : snapshot.at("segments")) {
    reserved[segment.at("device").get<int>()] += segment.at("total_size").get<int64_t>();
    allocated[segment.at("device").get<int>()] += segment.at("allocated_size").get<int64_t>();
  }
  for (int device : {0, 1}) {
    EXPECT_EQ(reserved[device], int64_t(cuda::memory_reserved(device))) << device;
    EXPECT_EQ(allocated[device], int64_t(cuda::memory_allocated(device))) << device;
  }
  const json& trace = snapshot.at("device_traces").at(1);
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0].at("action"), "segment_alloc");
  EXPECT_EQ(trace[1].at("action"), "alloc");
  EXPECT_EQ(trace[1].at("size"), 3 * MiB);
  cuda::record_memory_history(false);
  detail::cuda_allocator(1).deallocate(a);
}

TEST(MemoryApi, EmptyCacheReleasesEveryDevice) {
  void* a = detail::cuda_allocator(1).allocate(1000);
  detail::cuda_allocator(1).deallocate(a);
  EXPECT_GT(cuda::memory_reserved(1), 0u);
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
  EXPECT_EQ(cuda::mem_get_info(1).first, cuda::mem_get_info(1).second);
  EXPECT_EQ(cuda::mem_get_info(1).second, 64 * MiB);
  EXPECT_GE(cuda::memory_stats(1).at("num_sync_all_streams"), 1);
  const std::string summary = cuda::memory_summary(1);
  EXPECT_THAT(summary, ::testing::HasSubstr("ember CUDA memory summary, device ID 1"));
}

TEST(MemoryApi, MemoryFractionAppliesToOneDevice) {
  cuda::set_per_process_memory_fraction(0.25, 1);
  EXPECT_THROW(detail::cuda_allocator(1).allocate(20 * MiB), OutOfMemoryError);
  void* ok = detail::cuda_allocator(0).allocate(20 * MiB);
  detail::cuda_allocator(0).deallocate(ok);
  EXPECT_THROW(cuda::set_per_process_memory_fraction(2.0, 1), ValueError);
  cuda::set_per_process_memory_fraction(1.0, 1);
  void* now_ok = detail::cuda_allocator(1).allocate(20 * MiB);
  detail::cuda_allocator(1).deallocate(now_ok);
}

TEST(MemoryApi, PinnedAllocatorAndItsStats) {
  detail::Allocator& pinned = detail::pinned_allocator();
  EXPECT_EQ(&pinned, &detail::pinned_allocator());
  void* p = pinned.allocate(3000);
  EXPECT_EQ(cuda::host_memory_stats().at("allocated_bytes.current"), 4096);
  pinned.record_stream(p, &default_state(0));
  pinned.deallocate(p);
  cuda::default_stream(0).synchronize();  // the recorded event has completed
  EXPECT_EQ(pinned.allocate(4000), p);
  pinned.deallocate(p);
  EXPECT_EQ(cuda::host_memory_stats().at("num_host_alloc"), 1);
  cuda::reset_device(1);  // the reset hook returns the device's cache
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
}

// The spec's older names return the reserved figures; each warns once (PyTorch's
// FutureWarning text), on its first call only. Last in the file: the others count device
// 1's segments.
TEST(MemoryApi, MemoryCachedIsTheDeprecatedNameOfMemoryReserved) {
  detail::Allocator& device1 = detail::cuda_allocator(1);
  void* p = device1.allocate(3 * MiB);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cuda::memory_cached(1), cuda::memory_reserved(1));
  EXPECT_EQ(cuda::memory_cached(1), cuda::memory_reserved(1));
  EXPECT_EQ(cuda::max_memory_cached(1), cuda::max_memory_reserved(1));
  EXPECT_EQ(cuda::max_memory_cached(1), cuda::max_memory_reserved(1));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "FutureWarning: `torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`\n"
            "FutureWarning: `torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`\n");
  EXPECT_GE(cuda::memory_cached(1), 3 * MiB);
  device1.deallocate(p);
  EXPECT_THROW(cuda::memory_cached(7), IndexError);
  cuda::empty_cache();  // the programs' other tests expect no cached segment on device 1
}

}  // namespace
}  // namespace ember::testing
