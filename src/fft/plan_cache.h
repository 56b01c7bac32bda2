// FFT plans and the backend-neutral LRU plan cache behind backends::cuda::cufft_plan_cache.
//
// Note [FFT plan cache]
// A plan is the prepared form of one transform geometry (signal sizes, layout, batch,
// precision, direction, real/complex). Preparing it is costly (FFTW planning, cuFFT
// plan creation), executing it is cheap, so each cuda device keeps an LRU cache of plans
// keyed by PlanKey, as PyTorch keeps one per device for cuFFT. The cache knows nothing
// of FFTW or cuFFT: the backend makes the plans (Backend::create_fft_plan, an optional
// hook: host FFTW plans for the emulated backend, cuFFT plans for the driver; cpu tensors
// use the cpu backend's FFTW plans). Plans are handed out as shared_ptr and travel inside
// the KernelCall payload, so a plan evicted (or a cache cleared, or max_size set to 0)
// while work that uses it is still queued on a stream stays alive until that work has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/fft_plan.h"

namespace ember::detail::fft {

/// Makes a cache's plans: the backend's create_fft_plan for device caches, FFTW for the
/// host cache, a counting stand-in in tests. `device` is the cuda device, -1 for host plans.
class PlanFactory {
 public:
  virtual ~PlanFactory() = default;
  virtual std::shared_ptr<const Plan> create(const PlanKey& key, int device) = 0;
};

/// One device's LRU cache. Thread-safe; plans are created under its lock, as PyTorch
/// does, so two threads asking for the same new geometry make one plan.
class PlanCache {
 public:
  static constexpr int64_t kDefaultMaxSize = 4096;

  PlanCache(int device, PlanFactory& factory) : device_(device), factory_(&factory) {}

  /// The cached plan for `key` (now most recently used), or a new one, cached unless
  /// max_size is 0.
  std::shared_ptr<const Plan> get(const PlanKey& key);

  int64_t max_size() const;
  /// Evicts least recently used plans beyond `max_size`. Negative: ValueError.
  void set_max_size(int64_t max_size);
  int64_t size() const;
  void clear();
  /// Plans this cache's factory has made (hits do not count); for tests and benchmarks.
  int64_t plans_created() const;
  int device() const noexcept { return device_; }

 private:
  using Entry = std::pair<PlanKey, std::shared_ptr<const Plan>>;
  void evict_to(size_t size);  // with mutex_ held

  int device_;
  PlanFactory* factory_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index_;
  int64_t max_size_ = kDefaultMaxSize;
  int64_t plans_created_ = 0;
};

/// The plan cache of cuda device `device` (checked by the caller). Its plans come from the
/// backend's create_fft_plan; a backend without FFT makes get() throw DeviceError.
PlanCache& device_plan_cache(int device);
/// The process-wide cache of host plans used for cpu tensors; not user-visible, as
/// PyTorch has no cpu plan cache, but it spares FFTW replanning.
PlanCache& host_plan_cache();

}  // namespace ember::detail::fft
