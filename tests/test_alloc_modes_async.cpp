// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync on two emulated devices of 64 MiB: stream
// ordered frees (Note [Stream-ordered frees]), the pool's statistics, PyTorch's errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "emulated_support.h"
#include "memory/memory.h"
#include "runtime/stream_state.h"
#include "sanitizer/sanitizer.h"
#include "test_support.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool configured =
    (setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 1), ember::cuda::emulate(2, 64 * MiB), true);

}  // namespace

namespace ember::testing {
namespace {

detail::Allocator& device0() { return detail::cuda_allocator(0); }

// Each test starts from an empty pool with fresh peaks.
class AsyncAllocator : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(configured);
    cuda::empty_cache();
    cuda::reset_peak_memory_stats(0);
  }
};

// Holds `stream` at this point of its work until open() (a host function waits on it).
class Gate {
 public:
  explicit Gate(const cuda::Stream& stream) {
    on_stream(stream, [future = promise_.get_future().share()] { future.wait(); });
  }
  ~Gate() { open(); }
  void open() {
    if (!opened_) promise_.set_value();
    opened_ = true;
  }

 private:
  std::promise<void> promise_;
  bool opened_ = false;
};

TEST_F(AsyncAllocator, BackendNameAndThePoolsStatistics) {
  EXPECT_EQ(cuda::get_allocator_backend(), "cudaMallocAsync");
  void* p = device0().allocate(1000);
  // The emulated pool hands out 512-byte units; PyTorch reports the pool's counters only.
  EXPECT_EQ(cuda::memory_allocated(0), 1024u);
  EXPECT_EQ(cuda::memory_reserved(0), 1024u);
  std::map<std::string, int64_t> stats = cuda::memory_stats(0);
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), 1024);
  EXPECT_EQ(stats.at("active_bytes.all.current"), 1024);
  EXPECT_EQ(stats.at("reserved_bytes.all.current"), 1024);
  for (const char* zero : {"allocation.all.current", "segment.all.current", "num_device_alloc", "num_alloc_retries",
                           "allocated_bytes.small_pool.current", "reserved_bytes.large_pool.current",
                           "inactive_split_bytes.all.current", "requested_bytes.all.current", "max_split_size"})
    EXPECT_EQ(stats.at(zero), 0) << zero;
  device0().deallocate(p);
  cuda::synchronize();
  EXPECT_EQ(cuda::memory_allocated(0), 0u);
  EXPECT_EQ(cuda::memory_reserved(0), 1024u);  // kept by the pool
  EXPECT_EQ(cuda::max_memory_allocated(0), 1024u);
  cuda::reset_peak_memory_stats(0);
  EXPECT_EQ(cuda::max_memory_allocated(0), 0u);
  cuda::reset_accumulated_memory_stats(0);  // no effect, as PyTorch's
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(0), 0u);
  EXPECT_EQ(cuda::mem_get_info(0).first, 64 * MiB);
}

TEST_F(AsyncAllocator, AFreeIsReusableOnItsStreamAtOnceAndElsewhereAfterItsStreamReachesIt) {
  cuda::Stream side(0), other(0);
  void* p = nullptr;
  void* again = nullptr;
  Gate gate(side);
  {
    cuda::StreamGuard guard(side);
    p = device0().allocate(4096);
    device0().deallocate(p);  // queued behind the gate
    again = device0().allocate(4096);
    EXPECT_EQ(again, p);  // later work on `side` runs after the free
  }
  {
    cuda::StreamGuard guard(side);
    device0().deallocate(again);
  }
  void* elsewhere = nullptr;
  {
    cuda::StreamGuard guard(other);
    elsewhere = device0().allocate(4096);
    EXPECT_NE(elsewhere, p);  // `side` has not reached the free yet
  }
  EXPECT_EQ(cuda::memory_reserved(0), 8192u);
  gate.open();
  side.synchronize();
  {
    cuda::StreamGuard guard(other);
    void* reused = device0().allocate(4096);
    EXPECT_EQ(reused, p);
    EXPECT_EQ(cuda::memory_reserved(0), 8192u);
    device0().deallocate(reused);
    device0().deallocate(elsewhere);
  }
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(0), 0u);
}

TEST_F(AsyncAllocator, RecordStreamOrdersTheFreeAfterTheRecordedStream) {
  cuda::Stream side(0);
  void* p = device0().allocate(4096);
  device0().record_stream(p, side.state());
  Gate gate(side);
  device0().deallocate(p);  // freed on a stream that waits for `side` as well
  void* q = device0().allocate(4096);
  EXPECT_NE(q, p);
  gate.open();
  cuda::synchronize();
  device0().deallocate(q);
  cuda::synchronize();
  void* r = device0().allocate(4096);
  EXPECT_TRUE(r == p || r == q);
  EXPECT_EQ(cuda::memory_reserved(0), 8192u);  // no third block
  device0().deallocate(r);
  EXPECT_THROW(device0().record_stream(reinterpret_cast<void*>(0x10), side.state()), ValueError);
  cuda::empty_cache();
}

TEST_F(AsyncAllocator, MemoryFractionAndDeviceLimitRaiseOutOfMemory) {
  cuda::set_per_process_memory_fraction(0.5, 1);
  std::string message = error_of<OutOfMemoryError>([] {
    cuda::DeviceGuard guard(1);
    detail::cuda_allocator(1).allocate(40 * MiB);
  });
  EXPECT_EQ(message,
            "Allocation on device 1 would exceed allowed memory. (out of memory)\n"
            "Currently allocated     : 0 bytes\n"
            "Requested               : 40.00 MiB\n"
            "Device limit            : 64.00 MiB\n"
            "Free (according to CUDA): 64.00 MiB\n"
            "PyTorch limit (set by user-supplied memory fraction)\n"
            "                        : 32.00 MiB");
  EXPECT_THROW(device0().allocate(65 * MiB), OutOfMemoryError);
  EXPECT_EQ(cuda::memory_allocated(0), 0u);
  EXPECT_THROW(cuda::set_per_process_memory_fraction(1.5, 0), ValueError);
}

TEST_F(AsyncAllocator, TensorsComputeOnPoolMemory) {
  Tensor a = ones({1024}, TensorOptions().device(Device(kCUDA, 0)));
  Tensor b = a + a;
  EXPECT_EQ(cuda::memory_allocated(0), 8192u);
  EXPECT_FLOAT_EQ(b.sum().item<float>(), 2048.0f);
}

TEST_F(AsyncAllocator, SnapshotsHistoryAndSwapsAreRefused) {
  device0().deallocate(device0().allocate(512));
  EXPECT_EQ(error_of<Error>([] { cuda::memory_snapshot_json(); }),
            "Calling snapshot with backend:cudaMallocAsync is not meaningful. (For backend:native, snapshot returns "
            "a detailed summary of all blocks tracked by the allocator, but the cudaMallocAsync backend does not "
            "track individual blocks.)");
  EXPECT_EQ(error_of<Error>([] { cuda::record_memory_history(true); }),
            "cudaMallocAsync does not yet support recordHistory. If you need it, please file an issue describing "
            "your use case.");
  EXPECT_EQ(error_of<Error>([] { cuda::MemPool pool; }),
            "cudaMallocAsync does not yet support createOrIncrefPool. If you need it, please file an issue describing "
            "your use case.");
  auto fn = [](size_t, int, cuda::Stream) -> void* { return nullptr; };
  auto free_fn = [](void*, size_t, int, cuda::Stream) {};
  EXPECT_EQ(error_of<Error>([&] { cuda::change_current_allocator(cuda::PluggableAllocator(fn, free_fn)); }),
            "Can't swap an already initialized allocator");
  EXPECT_EQ(cuda::get_allocator_backend(), "cudaMallocAsync");
}

// A block the pool hands to another stream once its stream reached the free is ordered
// after the first user's work: the stream sanitizer reports no race on it, but still
// reports a stream that used the block without record_stream.
TEST_F(AsyncAllocator, TheSanitizerSeesPoolReuseAsOrdered) {
  const bool was_enabled = cuda::sanitizer::is_enabled();
  const cuda::sanitizer::Mode was_mode = cuda::sanitizer::mode();
  cuda::sanitizer::enable();
  cuda::Stream side(0);
  const void* first = nullptr;
  {
    cuda::StreamGuard guard(side);
    Tensor a = ones({256}, TensorOptions().device(Device(kCUDA, 0)));
    first = a.data_ptr();
  }  // freed on `side`
  // `side` reaches the free without the sanitizer seeing a synchronisation.
  detail::undecorated_backend().synchronize_device(0);
  Tensor c = empty({256}, TensorOptions().device(Device(kCUDA, 0)));
  ASSERT_EQ(c.data_ptr(), first) << "the pool should hand the block to the default stream";
  EXPECT_NO_THROW(c.fill_(2.0));
  // A third stream that read `c` without record_stream still races with the next user.
  cuda::Stream reader(0);
  reader.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(reader);
    (void)c.sum();
  }
  c = Tensor();
  detail::undecorated_backend().synchronize_device(0);
  Tensor d = empty({256}, TensorOptions().device(Device(kCUDA, 0)));
  ASSERT_EQ(d.data_ptr(), first);
  EXPECT_THROW(d.fill_(3.0), DataRaceError);
  cuda::synchronize();
  if (was_enabled) cuda::sanitizer::enable(was_mode);
  else cuda::sanitizer::disable();
}

// A free queued while the device is in an error state never runs its stream's marker
// (failed devices skip their work); after reset_device the block is back in the device.
TEST_F(AsyncAllocator, AFreeDuringAStickyErrorIsReturnedByTheReset) {
  cuda::DeviceGuard device(1);
  cuda::Stream side(1);
  void* p = nullptr;
  {
    cuda::StreamGuard guard(side);
    p = detail::cuda_allocator(1).allocate(4096);
  }
  EXPECT_THROW(
      {
        on_stream(side, [] { throw ValueError("bad kernel"); });  // raises here under CUDA_LAUNCH_BLOCKING
        side.synchronize();
      },
      CudaError);
  detail::cuda_allocator(1).deallocate(p);
  EXPECT_EQ(cuda::memory_allocated(1), 0u);
  cuda::reset_device(1);
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
  void* q = detail::cuda_allocator(1).allocate(4096);  // on the default stream
  EXPECT_EQ(cuda::memory_reserved(1), 4096u);
  detail::cuda_allocator(1).deallocate(q);
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
}

// Allocations made before reset_device(1) on streams the reset invalidated (and on the
// stream that orders multi-stream frees) still go back to the pool when freed after it.
TEST_F(AsyncAllocator, FreesAfterAResetOfStreamsFromBeforeItReturnTheMemory) {
  cuda::DeviceGuard device(1);
  void* plain = nullptr;
  void* recorded = nullptr;
  {
    cuda::Stream s(1), other(1);
    cuda::StreamGuard guard(s);
    void* warm = detail::cuda_allocator(1).allocate(4096);
    detail::cuda_allocator(1).record_stream(warm, other.state());
    detail::cuda_allocator(1).deallocate(warm);  // makes the ordering stream
    plain = detail::cuda_allocator(1).allocate(4096);
    recorded = detail::cuda_allocator(1).allocate(4096);
    detail::cuda_allocator(1).record_stream(recorded, other.state());
  }
  cuda::synchronize(1);
  cuda::reset_device(1);
  detail::cuda_allocator(1).deallocate(plain);
  detail::cuda_allocator(1).deallocate(recorded);
  EXPECT_EQ(cuda::memory_allocated(1), 0u);
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(1), 0u);
}

// Threads on their own streams of both devices allocate, record each other's streams and
// free at once: the pool's counters end balanced and everything goes back.
TEST_F(AsyncAllocator, ThreadsOnStreamsOfBothDevicesLeaveBalancedPools) {
  constexpr int kThreads = 4;
  std::vector<cuda::Stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.emplace_back(t % 2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int device = t % 2;
      cuda::DeviceGuard guard(device);
      cuda::StreamGuard stream(streams[static_cast<size_t>(t)]);
      std::vector<void*> live;
      for (int step = 0; step < 200; ++step) {
        if (live.size() < 8 && step % 3 != 2) {
          void* ptr = detail::cuda_allocator(device).allocate(static_cast<size_t>(512 * (1 + (step * 7 + t) % 64)));
          // Another thread's stream of the same device used it too.
          detail::cuda_allocator(device).record_stream(ptr, streams[static_cast<size_t>((t + 2) % kThreads)].state());
          live.push_back(ptr);
        } else if (!live.empty()) {
          detail::cuda_allocator(device).deallocate(live.back());
          live.pop_back();
        }
      }
      for (void* ptr : live) detail::cuda_allocator(device).deallocate(ptr);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int device : {0, 1}) EXPECT_EQ(cuda::memory_allocated(device), 0u) << device;
  cuda::empty_cache();
  for (int device : {0, 1}) EXPECT_EQ(cuda::memory_reserved(device), 0u) << device;
}

}  // namespace
}  // namespace ember::testing
