// The LRU plan cache and the per-device cache registry (Note [FFT plan cache]).
#include "fft/plan_cache.h"

#include <map>
#include <string>

#include "ember/errors.h"
#include "runtime/backend.h"

namespace ember::detail::fft {

IntList PlanKey::in_sizes() const {
  IntList sizes = signal_sizes;
  if (kind == TransformKind::C2R) sizes.back() = sizes.back() / 2 + 1;
  return sizes;
}

IntList PlanKey::out_sizes() const {
  IntList sizes = signal_sizes;
  if (kind == TransformKind::R2C) sizes.back() = sizes.back() / 2 + 1;
  return sizes;
}

size_t PlanKeyHash::operator()(const PlanKey& key) const noexcept {
  // FNV-1a over every field; keys are small, so this is cheap next to a lookup miss.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  mix(static_cast<int64_t>(key.kind));
  mix(key.forward);
  mix(static_cast<int64_t>(key.precision));
  for (const IntList* list : {&key.signal_sizes, &key.in_strides, &key.out_strides}) {
    mix(static_cast<int64_t>(list->size()));
    for (int64_t v : *list) mix(v);
  }
  mix(key.batch);
  mix(key.in_dist);
  mix(key.out_dist);
  return static_cast<size_t>(h);
}

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

// ---- registry -------------------------------------------------------------------

namespace {

struct FactoryRegistry {
  std::mutex mutex;
  std::map<std::string, PlanFactory*> by_backend;
};

FactoryRegistry& factory_registry() {
  static FactoryRegistry registry;  // function-local: registration runs from static initializers
  return registry;
}

PlanFactory& factory_for(const char* backend_name) {
  FactoryRegistry& registry = factory_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.by_backend.find(backend_name);
  return it != registry.by_backend.end() ? *it->second : host_plan_factory();
}

// One cache per device of the (fixed, once selected) cuda backend.
struct DeviceCaches {
  DeviceCaches() {
    Backend& cuda = backend();
    PlanFactory& factory = factory_for(cuda.name());
    for (int device = 0; device < cuda.device_count(); ++device)
      caches.push_back(std::make_unique<PlanCache>(device, factory));
  }
  std::vector<std::unique_ptr<PlanCache>> caches;
};

}  // namespace

void register_plan_factory(const char* backend_name, PlanFactory* factory) {
  FactoryRegistry& registry = factory_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.by_backend[backend_name] = factory;
}

PlanCache& device_plan_cache(int device) {
  static DeviceCaches caches;
  EMBER_ASSERT(device >= 0 && device < static_cast<int>(caches.caches.size()));
  return *caches.caches[static_cast<size_t>(device)];
}

PlanCache& host_plan_cache() {
  static PlanCache cache(-1, host_plan_factory());
  return cache;
}

}  // namespace ember::detail::fft
