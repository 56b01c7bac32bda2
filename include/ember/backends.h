// Backend flags (TF32) and the per-device FFT plan caches (torch.backends).
#pragma once

#include <cstdint>
#include <string>

#include "ember/device.h"

namespace ember {

/// "highest" (no TF32), "high" or "medium" (TF32 allowed in float32 matmul).
void set_float32_matmul_precision(const std::string& precision);
std::string get_float32_matmul_precision();

namespace backends {

namespace detail {
/// torch.backends.cuda.matmul.allow_tf32: reads and writes the float32 matmul precision.
struct MatmulTf32Flag {
  MatmulTf32Flag& operator=(bool allow);
  operator bool() const;  // NOLINT
};
/// torch.backends.cudnn.allow_tf32.
struct CudnnTf32Flag {
  CudnnTf32Flag& operator=(bool allow);
  operator bool() const;  // NOLINT
};
struct MatmulFlags {
  MatmulTf32Flag allow_tf32;
};
struct CudnnFlags {
  CudnnTf32Flag allow_tf32;
};
}  // namespace detail

namespace cuda {

/// One device's LRU cache of FFT plans.
class FFTPlanCache {
 public:
  explicit FFTPlanCache(int device) : device_(device) {}
  int64_t max_size() const;
  /// Lowering it evicts least recently used plans; 0 disables caching. Negative: ValueError.
  void set_max_size(int64_t max_size);
  /// Plans currently cached.
  int64_t size() const;
  void clear();
  int device() const noexcept { return device_; }

 private:
  int device_;
};

/// torch.backends.cuda.cufft_plan_cache: the current device's cache, or [i] for device i.
class FFTPlanCacheManager {
 public:
  FFTPlanCache operator[](int device) const;
  FFTPlanCache operator[](Device device) const;
  int64_t max_size() const;
  void set_max_size(int64_t max_size);
  int64_t size() const;
  void clear();
};

inline detail::MatmulFlags matmul;
inline FFTPlanCacheManager cufft_plan_cache;

}  // namespace cuda

inline detail::CudnnFlags cudnn;

}  // namespace backends
}  // namespace ember
