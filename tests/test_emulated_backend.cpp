// The emulated backend's memory and copies, used directly through the backend interface.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "emulated_support.h"
#include "runtime/stream_state.h"

namespace cuda = ember::cuda;
using namespace std::chrono_literals;
using ember::detail::CopyKind;
using ember::testing::emulated;

namespace {

constexpr size_t kCapacity = size_t{8} << 30;

const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(4, kCapacity);  // 32 GiB of virtual device memory: never touched
  return true;
}();

TEST(EmulatedBackend, MemoryIsCapacityLimited) {
  auto& b = emulated();
  EXPECT_EQ(b.mem_get_info(1), (std::pair<size_t, size_t>{kCapacity, kCapacity}));
  void* big = b.raw_alloc(1, kCapacity - 4096);  // almost all of it, without touching pages
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(b.mem_get_info(1).first, size_t{4096});
  EXPECT_EQ(b.raw_alloc(1, 8192), nullptr);  // past the capacity: null, no throw
  void* small = b.raw_alloc(1, 4096);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 512, 0u);
  EXPECT_EQ(b.mem_get_info(1).first, 0u);
  EXPECT_EQ(b.mem_get_info(2).first, kCapacity);  // devices are separate
  b.raw_free(1, big);
  b.raw_free(1, small);
  EXPECT_EQ(b.mem_get_info(1).first, kCapacity);
  int not_device_memory = 0;
  EXPECT_THROW(b.raw_free(1, &not_device_memory), ember::CudaError);
  EXPECT_THROW(b.raw_alloc(4, 16), ember::CudaError);
}

TEST(EmulatedBackend, PinnedMemory) {
  auto& b = emulated();
  void* p = b.pinned_alloc(1000);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 1000);
  b.pinned_free(p);
  int not_pinned = 0;
  EXPECT_THROW(b.pinned_free(&not_pinned), ember::CudaError);
}

TEST(EmulatedBackend, CopiesRoundTrip) {
  auto& b = emulated();
  auto* stream = b.default_stream(0);
  std::vector<int> host(1000);
  std::iota(host.begin(), host.end(), 0);
  size_t bytes = host.size() * sizeof(int);
  void* d1 = b.raw_alloc(0, bytes);
  void* d2 = b.raw_alloc(1, bytes);
  b.copy(d1, host.data(), bytes, CopyKind::HostToDevice, false, stream);
  b.copy(d2, d1, bytes, CopyKind::DeviceToDevice, false, stream);  // peer copy, queued
  std::vector<int> back(host.size());
  b.copy(back.data(), d2, bytes, CopyKind::DeviceToHost, false, stream);  // pageable: synchronous
  EXPECT_EQ(back, host);
  b.raw_free(0, d1);
  b.raw_free(1, d2);
}

TEST(EmulatedBackend, PageableUploadSnapshotsTheSource) {
  auto& b = emulated();
  cuda::Stream s(2);
  auto* stream = s.state()->native();
  std::vector<int> host = {1, 2, 3, 4};
  size_t bytes = host.size() * sizeof(int);
  void* dev = b.raw_alloc(2, bytes);
  b.sleep(stream, 100ms);  // the copy itself runs later
  b.copy(dev, host.data(), bytes, CopyKind::HostToDevice, /*host_pinned=*/false, stream);
  EXPECT_FALSE(b.query(stream));
  std::fill(host.begin(), host.end(), 0);  // allowed at once: the source was consumed
  std::vector<int> back(4);
  b.copy(back.data(), dev, bytes, CopyKind::DeviceToHost, false, stream);
  EXPECT_EQ(back, (std::vector<int>{1, 2, 3, 4}));
  b.raw_free(2, dev);
}

TEST(EmulatedBackend, PinnedCopiesAreAsynchronous) {
  auto& b = emulated();
  cuda::Stream s(3);
  auto* stream = s.state()->native();
  size_t bytes = 64 * sizeof(int);
  auto* pinned = static_cast<int*>(b.pinned_alloc(bytes));
  for (int i = 0; i < 64; ++i) pinned[i] = i * 3;
  void* dev = b.raw_alloc(3, bytes);
  b.copy(dev, pinned, bytes, CopyKind::HostToDevice, true, stream);
  auto* result = static_cast<int*>(b.pinned_alloc(bytes));
  std::memset(result, 0, bytes);
  b.sleep(stream, 100ms);
  b.copy(result, dev, bytes, CopyKind::DeviceToHost, /*host_pinned=*/true, stream);
  EXPECT_FALSE(b.query(stream));  // returned before the download ran
  cuda::Event done = s.record_event();
  done.synchronize();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(result[i], i * 3);
  b.raw_free(3, dev);
  b.pinned_free(pinned);
  b.pinned_free(result);
}

}  // namespace
