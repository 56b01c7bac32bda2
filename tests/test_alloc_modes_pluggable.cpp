// A user's PluggableAllocator (change_current_allocator) on two emulated devices: every
// device allocation and free goes through the user's pair, with its sizes, devices and
// streams; the memory API answers with PyTorch's errors; no second swap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "emulated_support.h"
#include "memory/memory.h"
#include "test_support.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

struct Call {
  void* ptr;
  size_t size;
  int device;
  uint64_t stream_id;
};

// What the user's functions saw. Emulated device memory is host memory, so the user's
// allocator may hand out heap memory.
struct Log {
  std::mutex mutex;
  std::vector<Call> mallocs, frees;
  int resets = 0;
  std::vector<std::pair<double, int>> fractions;
  bool refuse = false;           // the next malloc returns nullptr
  bool throw_on_malloc = false;  // the next malloc throws
  bool throw_on_free = false;    // the next free throws (after freeing)
  // While set: each free records whether its stream still had queued work, and the first
  // such free fulfils `checked_free`.
  bool check_stream_at_free = false;
  std::vector<bool> stream_busy_at_free;
  std::promise<void> checked_free;
};
Log& calls() {
  static Log instance;
  return instance;
}

ember::cuda::PluggableAllocator make_allocator() {
  ember::cuda::PluggableAllocator allocator(
      [](size_t size, int device, ember::cuda::Stream stream) -> void* {
        std::lock_guard lock(calls().mutex);
        if (std::exchange(calls().refuse, false)) return nullptr;
        if (std::exchange(calls().throw_on_malloc, false)) throw std::runtime_error("user malloc failed");
        void* ptr = std::aligned_alloc(512, (size + 511) / 512 * 512);
        calls().mallocs.push_back({ptr, size, device, stream.id()});
        return ptr;
      },
      [](void* ptr, size_t size, int device, ember::cuda::Stream stream) {
        std::lock_guard lock(calls().mutex);
        calls().frees.push_back({ptr, size, device, stream.id()});
        if (calls().check_stream_at_free) {
          calls().stream_busy_at_free.push_back(!stream.query());
          if (calls().stream_busy_at_free.size() == 1) calls().checked_free.set_value();
        }
        std::free(ptr);
        if (std::exchange(calls().throw_on_free, false)) throw std::runtime_error("user free failed");
      });
  allocator.set_reset_fn([] { ++calls().resets; });
  allocator.set_memory_fraction_fn(
      [](double fraction, int device) { calls().fractions.emplace_back(fraction, device); });
  return allocator;
}

// Before any other cuda use in this process (static initialization runs before main).
const bool installed =
    (ember::cuda::emulate(2, 64 * MiB), ember::cuda::change_current_allocator(make_allocator()), true);

}  // namespace

namespace ember::testing {
namespace {

TEST(PluggableAllocator, TensorsAllocateAndFreeThroughTheUsersPair) {
  ASSERT_TRUE(installed);
  EXPECT_EQ(cuda::get_allocator_backend(), "pluggable");
  const size_t before = calls().mallocs.size();
  const size_t frees_before = calls().frees.size();
  void* data = nullptr;
  {
    Tensor a = ones({256}, TensorOptions().device(Device(kCUDA, 0)));
    data = a.data_ptr();
    ASSERT_EQ(calls().mallocs.size(), before + 1);
    const Call& call = calls().mallocs.back();
    EXPECT_EQ(call.ptr, data);
    EXPECT_EQ(call.size, 1024u);  // exactly what the tensor needs: no rounding in between
    EXPECT_EQ(call.device, 0);
    EXPECT_EQ(call.stream_id, cuda::current_stream(0).id());
    EXPECT_FLOAT_EQ((a + a).sum().item<float>(), 512.0f);
  }
  cuda::synchronize();
  int freed = 0;
  for (size_t i = frees_before; i < calls().frees.size(); ++i) {
    const Call& call = calls().frees[i];
    if (call.ptr != data) continue;
    ++freed;
    EXPECT_EQ(call.size, 1024u);
    EXPECT_EQ(call.device, 0);
  }
  EXPECT_EQ(freed, 1);
}

TEST(PluggableAllocator, TheFreeGetsTheDeviceAndStreamOfItsAllocation) {
  cuda::Stream side(1);
  void* ptr = nullptr;
  {
    cuda::StreamGuard guard(side);
    cuda::DeviceGuard device(1);
    ptr = detail::cuda_allocator(1).allocate(3000);
  }
  const Call allocated = calls().mallocs.back();
  EXPECT_EQ(allocated.ptr, ptr);
  EXPECT_EQ(allocated.size, 3000u);
  EXPECT_EQ(allocated.device, 1);
  EXPECT_EQ(allocated.stream_id, side.id());
  detail::cuda_allocator(1).deallocate(ptr);  // from another current stream: the allocation's is passed
  const Call freed = calls().frees.back();
  EXPECT_EQ(freed.ptr, ptr);
  EXPECT_EQ(freed.size, 3000u);
  EXPECT_EQ(freed.device, 1);
  EXPECT_EQ(freed.stream_id, side.id());
  EXPECT_EQ(detail::cuda_allocator(0).allocate(0), nullptr);  // no call for empty storage
}

TEST(PluggableAllocator, NoMemoryFromTheUserIsAnOutOfMemoryError) {
  const size_t mallocs = calls().mallocs.size();
  calls().refuse = true;
  EXPECT_EQ(error_of<OutOfMemoryError>([] { detail::cuda_allocator(0).allocate(4096); }),
            "CUDA out of memory. The pluggable allocator returned no memory for 4096 bytes on device 0");
  EXPECT_EQ(calls().mallocs.size(), mallocs);
  void* ptr = detail::cuda_allocator(0).allocate(4096);  // the next call works again
  EXPECT_NE(ptr, nullptr);
  detail::cuda_allocator(0).deallocate(ptr);
}

TEST(PluggableAllocator, EmptyCacheAndMemoryFractionReachTheUsersFunctions) {
  const int resets = calls().resets;
  cuda::empty_cache();
  EXPECT_EQ(calls().resets, resets + 1);  // one allocator for all devices, as in PyTorch
  cuda::set_per_process_memory_fraction(0.25, 1);
  ASSERT_FALSE(calls().fractions.empty());
  EXPECT_EQ(calls().fractions.back(), std::make_pair(0.25, 1));
}

TEST(PluggableAllocator, StatisticsAndSnapshotsRaisePyTorchsErrors) {
  const std::string tail = ". If you need it, please file an issue describing your use case.";
  EXPECT_EQ(error_of<Error>([] { cuda::memory_stats(0); }),
            "CUDAPluggableAllocator does not yet support getDeviceStats" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::memory_allocated(0); }),
            "CUDAPluggableAllocator does not yet support getDeviceStats" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::reset_peak_memory_stats(0); }),
            "CUDAPluggableAllocator does not yet support resetPeakStats" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::reset_accumulated_memory_stats(0); }),
            "CUDAPluggableAllocator does not yet support resetAccumulatedStats" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::memory_snapshot_json(); }),
            "CUDAPluggableAllocator does not yet support snapshot" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::record_memory_history(true); }),
            "CUDAPluggableAllocator does not yet support recordHistory" + tail);
  EXPECT_EQ(error_of<Error>([] { cuda::MemPool pool; }),
            "CUDAPluggableAllocator does not yet support createOrIncrefPool" + tail);
}

TEST(PluggableAllocator, ASecondSwapIsRefusedAndTheFirstStays) {
  detail::cuda_allocator(0).deallocate(detail::cuda_allocator(0).allocate(1));  // the allocator is initialized
  int other_calls = 0;
  cuda::PluggableAllocator other([&](size_t, int, cuda::Stream) -> void* { return ++other_calls, nullptr; },
                                 [](void*, size_t, int, cuda::Stream) {});
  EXPECT_EQ(error_of<Error>([&] { cuda::change_current_allocator(other); }),
            "Can't swap an already initialized allocator");
  const size_t mallocs = calls().mallocs.size();
  detail::cuda_allocator(0).deallocate(detail::cuda_allocator(0).allocate(100));
  EXPECT_EQ(calls().mallocs.size(), mallocs + 1);
  EXPECT_EQ(other_calls, 0);
  EXPECT_EQ(cuda::get_allocator_backend(), "pluggable");
}

TEST(PluggableAllocator, BothFunctionsAreRequired) {
  EXPECT_THROW(cuda::PluggableAllocator(nullptr, [](void*, size_t, int, cuda::Stream) {}), ValueError);
  EXPECT_THROW(cuda::PluggableAllocator([](size_t, int, cuda::Stream) -> void* { return nullptr; }, nullptr),
               ValueError);
}

TEST(PluggableAllocator, AThrowingMallocPropagatesAndAThrowingFreeIsReported) {
  const size_t mallocs = calls().mallocs.size();
  calls().throw_on_malloc = true;
  EXPECT_THROW_MSG(detail::cuda_allocator(0).allocate(4096), std::runtime_error, "user malloc failed");
  EXPECT_EQ(calls().mallocs.size(), mallocs);
  void* ptr = detail::cuda_allocator(0).allocate(4096);
  // A free runs in destructors: the user's exception must not end the process.
  calls().throw_on_free = true;
  ::testing::internal::CaptureStderr();
  detail::cuda_allocator(0).deallocate(ptr);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(printed, ::testing::HasSubstr("ember: warning: the pluggable allocator's free of 4096 bytes on device 0 "
                                            "threw: user free failed"));
  {
    Tensor a = ones({16}, TensorOptions().device(Device(kCUDA, 0)));  // still usable
    EXPECT_FLOAT_EQ(a.sum().item<float>(), 16.0f);
  }
}

// Note [Pluggable frees wait for the device]: `x * 3 + 1` drops `x * 3` while `+ 1` is
// queued behind a closed gate. The user's free must not run before that work has: it
// records whether its stream was still busy. The gate opens once the free has run, or, when
// the free waits for the device as it must, from a helper thread after a while (how long
// does not change the outcome, only how long the test takes).
TEST(PluggableAllocator, TheUsersFreeRunsOnlyOnceQueuedWorkNoLongerUsesTheMemory) {
  const TensorOptions on0 = TensorOptions().device(Device(kCUDA, 0));
  Tensor x = ones({1024}, on0);
  cuda::synchronize();
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  std::future<void> freed;
  {
    std::lock_guard lock(calls().mutex);
    calls().checked_free = std::promise<void>();
    freed = calls().checked_free.get_future();
    calls().stream_busy_at_free.clear();
    calls().check_stream_at_free = true;
  }
  std::thread opener([&] {
    (void)freed.wait_for(std::chrono::milliseconds(300));
    gate.set_value();
  });
  ember::testing::on_stream(cuda::current_stream(0), [opened] { opened.wait(); });
  Tensor y = x * 3.0 + 1.0;
  opener.join();
  cuda::synchronize();
  {
    std::lock_guard lock(calls().mutex);
    calls().check_stream_at_free = false;
    ASSERT_EQ(calls().stream_busy_at_free.size(), 1u);  // the temporary's
    EXPECT_FALSE(calls().stream_busy_at_free[0]);
  }
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 4.0f * 1024);
}

// The loop: heap memory handed back while kernels still read it gave wrong sums
// (or a crash in the stream's worker).
TEST(PluggableAllocator, TemporariesFreedInALoopNeverCorruptResults) {
  const TensorOptions on0 = TensorOptions().device(Device(kCUDA, 0));
  Tensor x = ones({1 << 16}, on0);
  for (int i = 0; i < 100; ++i) {
    Tensor y = x * 3.0 + 1.0;
    ASSERT_FLOAT_EQ(y.sum().item<float>(), 4.0f * (1 << 16)) << "iteration " << i;
  }
}

}  // namespace
}  // namespace ember::testing
