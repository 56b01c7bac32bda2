// pinned_use_cuda_host_register / pinned_num_register_threads: pinned blocks as registered
// host memory on an emulated device, through the caching host allocator and end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backends/emulated/emulated_backend.h"
#include "ember/ember.h"
#include "emulated_support.h"
#include "memory/caching_host_allocator.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// Before any other cuda use in this process (static initialization runs before main).
const bool configured =
    (setenv("PYTORCH_CUDA_ALLOC_CONF", "pinned_use_cuda_host_register:True,pinned_num_register_threads:4", 1),
     ember::cuda::emulate(1, 64 * MiB), true);

}  // namespace

namespace ember::testing {
namespace {

detail::emulated::EmulatedBackend& as_emulated(detail::Backend& backend) {
  return dynamic_cast<detail::emulated::EmulatedBackend&>(backend);
}

TEST(PinnedHostRegister, BlocksAreRegisteredHostMemoryUntilReleased) {
  for (size_t threads : {1, 4, 128}) {
    auto backend = detail::make_emulated_backend(64 * MiB, {0});
    {
      detail::CachingHostAllocator pinned(*backend, /*use_host_register=*/true, threads);
      // 4 MiB: a page per thread for every count; 1000 bytes: fewer pages than threads.
      auto* large = static_cast<unsigned char*>(pinned.malloc(3 * MiB + 1));
      void* small = pinned.malloc(1000);
      EXPECT_EQ(as_emulated(*backend).registered_host_bytes(), 4 * MiB + 1024) << threads;
      std::memset(large, 0xab, 3 * MiB + 1);  // ordinary, writable host memory
      EXPECT_EQ(large[3 * MiB], 0xab);
      std::map<std::string, int64_t> stats = pinned.stats();
      EXPECT_EQ(stats.at("reserved_bytes.current"), static_cast<int64_t>(4 * MiB + 1024));
      EXPECT_EQ(stats.at("num_host_alloc"), 2);
      pinned.free(large);
      pinned.free(small);
      EXPECT_EQ(as_emulated(*backend).registered_host_bytes(), 4 * MiB + 1024);  // cached
      void* again = pinned.malloc(4 * MiB);
      EXPECT_EQ(again, large);  // the cached registered block
      pinned.free(again);
      pinned.empty_cache();
      EXPECT_EQ(as_emulated(*backend).registered_host_bytes(), 0u);
      EXPECT_EQ(pinned.stats().at("num_host_free"), 2);
    }
  }
}

TEST(PinnedHostRegister, WithoutTheOptionNothingIsRegistered) {
  auto backend = detail::make_emulated_backend(64 * MiB, {0});
  detail::CachingHostAllocator pinned(*backend);
  void* ptr = pinned.malloc(MiB);
  EXPECT_EQ(as_emulated(*backend).registered_host_bytes(), 0u);
  pinned.free(ptr);
}

TEST(PinnedHostRegister, RegisteringARangeTwiceIsACudaError) {
  auto backend = detail::make_emulated_backend(64 * MiB, {0});
  std::vector<char> memory(8192);
  EXPECT_TRUE(backend->host_register(memory.data(), 8192));
  EXPECT_THROW(backend->host_register(memory.data() + 4096, 100), CudaError);
  backend->host_unregister(memory.data());
  EXPECT_THROW(backend->host_unregister(memory.data()), CudaError);
}

TEST(PinnedHostRegister, PinnedTensorsUseRegisteredMemoryFromTheEnvironment) {
  ASSERT_TRUE(configured);
  const size_t before = emulated().registered_host_bytes();
  Tensor host = ones({1024, 1024});
  Tensor pinned = host.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_EQ(emulated().registered_host_bytes(), before + 4 * MiB);
  Tensor on_device = pinned.to(Device(kCUDA, 0), /*non_blocking=*/true);
  EXPECT_FLOAT_EQ(on_device.sum().item<float>(), 1024.0f * 1024.0f);
  EXPECT_EQ(cuda::host_memory_stats().at("allocated_bytes.current"), static_cast<int64_t>(4 * MiB));
}

}  // namespace
}  // namespace ember::testing
