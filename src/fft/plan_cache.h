// FFT plans and the backend-neutral LRU plan cache behind backends::cuda::cufft_plan_cache.
//
// Note [FFT plan cache]
// A plan is the prepared form of one transform geometry (signal sizes, layout, batch,
// precision, direction, real/complex). Preparing it is costly (FFTW planning, cuFFT
// plan creation), executing it is cheap, so each cuda device keeps an LRU cache of plans
// keyed by PlanKey, as PyTorch keeps one per device for cuFFT. The cache knows nothing
// of FFTW or cuFFT: a PlanFactory, chosen by backend (host FFTW plans for the emulated
// backend, cuFFT plans for the driver), makes the plans. Plans are handed out as
// shared_ptr and travel inside the KernelCall payload, so a plan evicted (or a cache
// cleared, or max_size set to 0) while work that uses it is still queued on a stream
// stays alive until that work has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ember/dtype.h"
#include "ember/tensor.h"

namespace ember::detail::fft {

enum class TransformKind : uint8_t { C2C, R2C, C2R };

/// The geometry and configuration of one batched transform. Strides and distances are in
/// elements of the input and output element types (complex elements for complex sides).
struct PlanKey {
  TransformKind kind = TransformKind::C2C;
  bool forward = true;          // C2C only; R2C is always forward, C2R always inverse
  DType precision = kFloat32;   // kFloat32 or kFloat64: the real type of the transform
  IntList signal_sizes;         // logical sizes (real lengths for R2C/C2R), rank 1..3
  IntList in_strides, out_strides;  // per signal dim
  int64_t batch = 1;
  int64_t in_dist = 0, out_dist = 0;  // between consecutive batch items

  bool operator==(const PlanKey&) const = default;
  /// Sizes of the input and output signals (the complex side of R2C/C2R is n/2+1 long in the last dim).
  IntList in_sizes() const;
  IntList out_sizes() const;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const noexcept;
};

/// A prepared transform; backend-specific subclasses execute it.
class Plan {
 public:
  explicit Plan(PlanKey key) : key_(std::move(key)) {}
  virtual ~Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  const PlanKey& key() const noexcept { return key_; }

 private:
  PlanKey key_;
};

/// Makes plans for one backend. `device` is the cuda device, -1 for host plans.
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

/// Registers the plan factory of the backend named `backend_name` ("driver"). Backends
/// without one (the emulated backend) use the host (FFTW) factory.
void register_plan_factory(const char* backend_name, PlanFactory* factory);

/// The plan cache of cuda device `device` (checked by the caller).
PlanCache& device_plan_cache(int device);
/// The process-wide cache of host plans used for cpu tensors; not user-visible, as
/// PyTorch has no cpu plan cache, but it spares FFTW replanning.
PlanCache& host_plan_cache();
/// The factory of host (FFTW) plans.
PlanFactory& host_plan_factory();

}  // namespace ember::detail::fft
