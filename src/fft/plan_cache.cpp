// The LRU plan cache and the per-device caches (Note [FFT plan cache]).
#include "fft/plan_cache.h"

#include "backends/cpu/fftw_plan.h"
#include "ember/errors.h"
#include "runtime/backend.h"
#include "runtime/registry.h"

namespace ember::detail::fft {

std::shared_ptr<const Plan> PlanCache::get(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  std::shared_ptr<const Plan> plan = factory_->create(key, device_);
  ++plans_created_;
  if (max_size_ > 0) {
    lru_.emplace_front(key, plan);
    index_.emplace(key, lru_.begin());
    evict_to(static_cast<size_t>(max_size_));
  }
  return plan;
}

int64_t PlanCache::max_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_size_;
}

void PlanCache::set_max_size(int64_t max_size) {
  EMBER_CHECK(max_size >= 0, ValueError, "cuFFT plan cache size must be non-negative, but got ", max_size);
  std::lock_guard<std::mutex> lock(mutex_);
  max_size_ = max_size;
  evict_to(static_cast<size_t>(max_size));
}

int64_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(lru_.size());
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  evict_to(0);
}

int64_t PlanCache::plans_created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_created_;
}

void PlanCache::evict_to(size_t size) {
  while (lru_.size() > size) {
    index_.erase(lru_.back().first);
    lru_.pop_back();  // the plan dies here unless queued work still holds it
  }
}

// ---- the caches ------------------------------------------------------------------

namespace {

/// Plans of the cuda backend's create_fft_plan hook (the backend itself: making a plan
/// touches no stream, so the stream sanitizer's decorator has nothing to see).
class BackendPlanFactory final : public PlanFactory {
 public:
  explicit BackendPlanFactory(Backend& backend) : backend_(backend) {}
  std::shared_ptr<const Plan> create(const PlanKey& key, int device) override {
    // cuFFT allocates while planning, which a Global-mode thread may not do during a
    // capture: the first transform of a shape inside a capture makes its plan Relaxed.
    CaptureModeGuard relaxed(backend_, CaptureMode::Relaxed);
    std::shared_ptr<const Plan> plan = backend_.create_fft_plan(key, device);
    EMBER_CHECK(plan != nullptr, DeviceError, "fft: the ", backend_.name(),
                " cuda backend does not support FFT (it makes no FFT plans)");
    return plan;
  }

 private:
  Backend& backend_;
};

/// Host (FFTW) plans, the cpu backend's.
class HostPlanFactory final : public PlanFactory {
 public:
  std::shared_ptr<const Plan> create(const PlanKey& key, int /*device*/) override { return cpu::create_fft_plan(key); }
};

// One cache per device of the (fixed, once selected) cuda backend.
struct DeviceCaches {
  DeviceCaches() : factory(undecorated_backend()) {
    for (int device = 0; device < undecorated_backend().device_count(); ++device)
      caches.push_back(std::make_unique<PlanCache>(device, factory));
    // Plans made on a device go before a backend destroys its context.
    set_context_loss_hook([](int device) { device_plan_cache(device).clear(); });
  }
  BackendPlanFactory factory;
  std::vector<std::unique_ptr<PlanCache>> caches;
};

}  // namespace

PlanCache& device_plan_cache(int device) {
  static DeviceCaches caches;
  EMBER_ASSERT(device >= 0 && device < static_cast<int>(caches.caches.size()));
  return *caches.caches[static_cast<size_t>(device)];
}

PlanCache& host_plan_cache() {
  static HostPlanFactory factory;
  static PlanCache cache(-1, factory);
  return cache;
}

}  // namespace ember::detail::fft
