// backends::cuda::cufft_plan_cache: the user-facing handles over the per-device plan caches.
//
// FFTPlanCache is a (device index) handle, like the object PyTorch's
// cufft_plan_cache[i] returns; every call goes to that device's PlanCache.
#include "ember/backends.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "fft/plan_cache.h"

namespace ember::backends::cuda {
namespace {

ember::detail::fft::PlanCache& cache_of(int device) { return ember::detail::fft::device_plan_cache(device); }

int checked_index(int device) {
  const int count = ember::cuda::device_count();
  EMBER_CHECK(device >= 0 && device < count, IndexError, "cufft_plan_cache: expected 0 <= device index < ", count,
              ", but got device with index ", device);
  return device;
}

}  // namespace

int64_t FFTPlanCache::max_size() const { return cache_of(checked_index(device_)).max_size(); }
void FFTPlanCache::set_max_size(int64_t max_size) { cache_of(checked_index(device_)).set_max_size(max_size); }
int64_t FFTPlanCache::size() const { return cache_of(checked_index(device_)).size(); }
void FFTPlanCache::clear() { cache_of(checked_index(device_)).clear(); }

FFTPlanCache FFTPlanCacheManager::operator[](int device) const { return FFTPlanCache(checked_index(device)); }

FFTPlanCache FFTPlanCacheManager::operator[](Device device) const {
  EMBER_CHECK(device.is_cuda(), ValueError, "Expected a cuda device, but got: ", device.str());
  return (*this)[device.has_index() ? device.index() : ember::cuda::current_device()];
}

int64_t FFTPlanCacheManager::max_size() const { return (*this)[ember::cuda::current_device()].max_size(); }
void FFTPlanCacheManager::set_max_size(int64_t max_size) {
  (*this)[ember::cuda::current_device()].set_max_size(max_size);
}
int64_t FFTPlanCacheManager::size() const { return (*this)[ember::cuda::current_device()].size(); }
void FFTPlanCacheManager::clear() { (*this)[ember::cuda::current_device()].clear(); }

}  // namespace ember::backends::cuda
