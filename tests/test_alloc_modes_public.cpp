// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True through the public API, on two emulated
// devices of 256 MiB: tensors of a batch size that changes every step, memory_stats,
// the snapshot's segments, and an allocator swap refused after the first allocation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "ember/ember.h"
#include "test_support.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool configured =
    (setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1), ember::cuda::emulate(2, 256 * MiB), true);

}  // namespace

namespace ember::testing {
namespace {

TEST(ExpandableSegmentsApi, ChangingBatchSizesGrowOneSegment) {
  ASSERT_TRUE(configured);
  EXPECT_EQ(cuda::get_allocator_backend(), "native");
  const TensorOptions on_device = TensorOptions().device(Device(kCUDA, 0));
  for (int64_t batch : {3, 5, 4, 7, 6, 8}) {
    Tensor activations = ones({batch, 1024, 1024}, on_device);  // batch * 4 MiB
    EXPECT_FLOAT_EQ(activations.sum().item<float>(), static_cast<float>(batch * 1024 * 1024));
  }
  cuda::synchronize();
  // One 20 MiB page for the first steps, a second one at batch 7 (28 MiB); the small pool
  // holds the sums.
  std::map<std::string, int64_t> stats = cuda::memory_stats(0);
  EXPECT_EQ(stats.at("reserved_bytes.large_pool.current"), static_cast<int64_t>(40 * MiB));
  EXPECT_EQ(stats.at("reserved_bytes.small_pool.current"), static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), 0);
  nlohmann::json snapshot = nlohmann::json::parse(cuda::memory_snapshot_json());
  EXPECT_EQ(snapshot["allocator_settings"]["expandable_segments"], true);
  int segments = 0;
  for (const auto& segment : snapshot["segments"]) {
    if (segment["device"] != 0) continue;
    ++segments;
    EXPECT_EQ(segment["is_expandable"], true);
    EXPECT_EQ(segment["total_size"], segment["segment_type"] == "large" ? 40 * MiB : 2 * MiB);
  }
  EXPECT_EQ(segments, 2);
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(0), 0u);
  EXPECT_EQ(cuda::mem_get_info(0).first, 256 * MiB);
}

TEST(ExpandableSegmentsApi, AnAllocatorSwapAfterAllocationsIsRefusedWithStateIntact) {
  Tensor kept = ones({1024, 1024}, TensorOptions().device(Device(kCUDA, 1)));
  const auto stats = cuda::memory_stats(1);
  const std::string snapshot = cuda::memory_snapshot_json();
  cuda::PluggableAllocator other([](size_t, int, cuda::Stream) -> void* { return nullptr; },
                                 [](void*, size_t, int, cuda::Stream) {});
  EXPECT_EQ(error_of<Error>([&] { cuda::change_current_allocator(other); }),
            "Can't swap an already initialized allocator");
  EXPECT_EQ(cuda::get_allocator_backend(), "native");
  EXPECT_EQ(cuda::memory_stats(1), stats);
  EXPECT_EQ(cuda::memory_snapshot_json(), snapshot);
  Tensor more = kept + kept;  // still the caching allocator
  EXPECT_EQ(cuda::memory_allocated(1), 8 * MiB);
}

}  // namespace
}  // namespace ember::testing
