// backends::cuda::cufft_plan_cache on cuda devices: per-device caches, size changes with
// new geometries, hits reuse plans, LRU eviction, max_size 0, errors.
#include "fft/plan_cache.h"
#include "test_support.h"

using namespace ember;
namespace cache_api = ember::backends::cuda;

namespace {

int64_t plans_created(int device) { return detail::fft::device_plan_cache(device).plans_created(); }

Tensor signal(int64_t n, const char* device) { return ones({2, n}, TensorOptions(kComplex64).device(device)); }

// Every test starts and ends with empty caches of the default capacity on every device.
class PlanCacheDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    ember::testing::ensure_cuda();
    reset();
  }
  void TearDown() override { reset(); }
  static void reset() {
    for (int d = 0; d < cuda::device_count(); ++d) {
      cache_api::cufft_plan_cache[d].set_max_size(4096);
      cache_api::cufft_plan_cache[d].clear();
    }
  }
};

TEST_F(PlanCacheDevices, NewGeometriesGrowTheCacheAndHitsReusePlans) {
  auto cache = cache_api::cufft_plan_cache[0];
  EXPECT_EQ(cache.max_size(), 4096);
  EXPECT_EQ(cache.size(), 0);
  const int64_t before = plans_created(0);
  fft::fft(signal(5, "cuda:0"));
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(plans_created(0), before + 1);
  for (int i = 0; i < 3; ++i) fft::fft(signal(5, "cuda:0"));  // same geometry: a hit
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(plans_created(0), before + 1);
  fft::ifft(signal(5, "cuda:0"));                                      // other direction
  fft::fft(signal(6, "cuda:0"));                                       // other length
  fft::fft(signal(5, "cuda:0").to(kComplex128));                       // other precision
  fft::rfft(ones({2, 5}, "cuda:0"));                                   // real input
  fft::fft(ones({3, 5}, TensorOptions(kComplex64).device("cuda:0")));  // other batch
  EXPECT_EQ(cache.size(), 6);
  EXPECT_EQ(plans_created(0), before + 6);
  cache.clear();
  EXPECT_EQ(cache.size(), 0);
  fft::fft(signal(5, "cuda:0"));
  EXPECT_EQ(plans_created(0), before + 7);
}

TEST_F(PlanCacheDevices, LoweringMaxSizeEvictsLeastRecentlyUsed) {
  auto cache = cache_api::cufft_plan_cache[0];
  for (int64_t n : {3, 4, 5}) fft::fft(signal(n, "cuda:0"));
  fft::fft(signal(3, "cuda:0"));  // 4 is now the least recently used
  cache.set_max_size(2);
  EXPECT_EQ(cache.size(), 2);
  const int64_t before = plans_created(0);
  fft::fft(signal(3, "cuda:0"));
  fft::fft(signal(5, "cuda:0"));
  EXPECT_EQ(plans_created(0), before);
  fft::fft(signal(4, "cuda:0"));
  EXPECT_EQ(plans_created(0), before + 1);
  EXPECT_EQ(cache.size(), 2);
}

TEST_F(PlanCacheDevices, MaxSizeZeroDisablesCachingButFftsStillWork) {
  auto cache = cache_api::cufft_plan_cache[0];
  fft::fft(signal(7, "cuda:0"));
  cache.set_max_size(0);
  EXPECT_EQ(cache.size(), 0);
  const int64_t before = plans_created(0);
  for (int i = 0; i < 3; ++i) {
    auto v = fft::fft(signal(7, "cuda:0")).to_vector<std::complex<float>>();
    EXPECT_NEAR(v[0].real(), 7, 1e-5);
    EXPECT_NEAR(std::abs(v[1]), 0, 1e-5);
  }
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(plans_created(0), before + 3);
}

TEST_F(PlanCacheDevices, EachDeviceHasItsOwnCache) {
  EMBER_REQUIRE_DEVICES(2);
  cache_api::cufft_plan_cache[0].set_max_size(10);
  cache_api::cufft_plan_cache[1].set_max_size(11);
  {
    cuda::DeviceGuard guard(1);
    EXPECT_EQ(cache_api::cufft_plan_cache.max_size(), 11);
    cache_api::cufft_plan_cache.set_max_size(12);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_EQ(cache_api::cufft_plan_cache.max_size(), 10);
  EXPECT_EQ(cache_api::cufft_plan_cache[1].max_size(), 12);
  EXPECT_EQ(cache_api::cufft_plan_cache[Device("cuda:1")].max_size(), 12);
  EXPECT_EQ(cache_api::cufft_plan_cache[Device("cuda")].max_size(), 10);

  // A transform on device 1 fills device 1's cache only, whatever the current device.
  fft::fft(signal(9, "cuda:1"));
  EXPECT_EQ(cache_api::cufft_plan_cache[1].size(), 1);
  EXPECT_EQ(cache_api::cufft_plan_cache[0].size(), 0);
  {
    cuda::DeviceGuard guard(1);
    EXPECT_EQ(cache_api::cufft_plan_cache.size(), 1);
    cache_api::cufft_plan_cache.clear();
  }
  EXPECT_EQ(cache_api::cufft_plan_cache[1].size(), 0);
}

TEST_F(PlanCacheDevices, OnePlanServesConcurrentStreams) {
  // Two streams run transforms of one geometry at once: one plan, correct results on both.
  Tensor a = ones({8, 32}, TensorOptions(kComplex64).device("cuda:0"));
  Tensor b = full({8, 32}, 2.0, TensorOptions(kComplex64).device("cuda:0"));
  cuda::Stream s1, s2;
  s1.wait_stream(cuda::current_stream());  // a and b are made on the current stream
  s2.wait_stream(cuda::current_stream());
  Tensor ya, yb;
  const int64_t before = plans_created(0);
  {
    cuda::StreamGuard guard(s1);
    cuda::sleep(std::chrono::milliseconds(5));  // both transforms queue before either runs
    ya = fft::fft(a);
  }
  {
    cuda::StreamGuard guard(s2);
    yb = fft::fft(b);
  }
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(plans_created(0), before + 1);
  auto va = ya.to_vector<std::complex<float>>(), vb = yb.to_vector<std::complex<float>>();
  for (int64_t row = 0; row < 8; ++row) {
    EXPECT_NEAR(va[row * 32].real(), 32, 1e-4);
    EXPECT_NEAR(vb[row * 32].real(), 64, 1e-4);
    EXPECT_LT(std::abs(va[row * 32 + 1]) + std::abs(vb[row * 32 + 1]), 1e-4);
  }
}

TEST_F(PlanCacheDevices, CpuTransformsDoNotUseDeviceCaches) {
  fft::fft(ones({4, 13}, kComplex64));
  for (int d = 0; d < cuda::device_count(); ++d) EXPECT_EQ(cache_api::cufft_plan_cache[d].size(), 0);
}

TEST_F(PlanCacheDevices, ErrorsNameTheValuesAndLeaveTheCacheIntact) {
  auto cache = cache_api::cufft_plan_cache[0];
  cache.set_max_size(10);
  fft::fft(signal(5, "cuda:0"));
  EXPECT_THROW_MSG(cache.set_max_size(-1), ValueError, "cuFFT plan cache size must be non-negative, but got -1");
  EXPECT_THROW_MSG(cache_api::cufft_plan_cache.set_max_size(-5), ValueError, "but got -5");
  EXPECT_EQ(cache.max_size(), 10);
  EXPECT_EQ(cache.size(), 1);
  const std::string expected = "cufft_plan_cache: expected 0 <= device index < " +
                               std::to_string(cuda::device_count()) + ", but got device with index 9";
  EXPECT_THROW_MSG(cache_api::cufft_plan_cache[9], IndexError, expected);
  EXPECT_THROW_MSG(cache_api::cufft_plan_cache[-1], IndexError, "but got device with index -1");
  EXPECT_THROW_MSG(cache_api::cufft_plan_cache[Device("cuda:9")], IndexError, expected);
  EXPECT_THROW_MSG(cache_api::cufft_plan_cache[Device("cpu")], ValueError, "Expected a cuda device, but got: cpu");
}

}  // namespace
