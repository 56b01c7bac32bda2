// Backend flags (TF32, float32 precision, reduced-precision GEMMs) and the per-device FFT plan
// caches (torch.backends).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ember/device.h"

namespace ember {

/// "highest" (no TF32), "high" or "medium" (TF32 allowed in float32 matmul).
void set_float32_matmul_precision(const std::string& precision);
std::string get_float32_matmul_precision();

namespace backends {

namespace detail {

/// The float32 precision settings of PyTorch 2.9's torch.backends, a tree: the global one,
/// cuDNN's ("cuda", "all" in PyTorch), and under it matmul, conv and rnn.
enum class Fp32Setting : uint8_t { kGlobal, kCudnn, kMatmul, kConv, kRnn };

/// One fp32_precision setting: "ieee", "tf32", "none" (inherit from the parent) or, for the
/// global one only, "bf16". Reading it answers the value in force (a "none" resolved through
/// its parents, as PyTorch's getter). A bad value throws Error ("Unknown precision: ..." or
/// "backend 'cuda' does not support precision 'bf16'") and changes nothing.
class Fp32Precision {
 public:
  explicit constexpr Fp32Precision(Fp32Setting setting) noexcept : setting_(setting) {}
  Fp32Precision(const Fp32Precision&) = delete;
  Fp32Precision& operator=(const Fp32Precision&) = delete;
  Fp32Precision& operator=(std::string_view precision);
  operator std::string() const;  // NOLINT: reads like PyTorch's attribute
  friend bool operator==(const Fp32Precision& setting, std::string_view precision) {
    return std::string(setting) == precision;
  }

 private:
  Fp32Setting setting_;
};

/// torch.backends.cuda.matmul.allow_tf32: a view of matmul.fp32_precision ("tf32" or "ieee").
struct MatmulTf32Flag {
  MatmulTf32Flag& operator=(bool allow);
  operator bool() const;  // NOLINT
};
/// torch.backends.cudnn.allow_tf32: writes conv and rnn ("tf32", or "none" to inherit), reads
/// them when they agree (Error, PyTorch's message, when they do not).
struct CudnnTf32Flag {
  CudnnTf32Flag& operator=(bool allow);
  operator bool() const;  // NOLINT
};

/// The boolean cuBLAS switches of torch.backends.cuda.matmul.
enum class BlasSwitch : uint8_t { kFp16ReducedPrecisionReduction, kBf16ReducedPrecisionReduction, kFp16Accumulation };
class BlasFlag {
 public:
  explicit constexpr BlasFlag(BlasSwitch which) noexcept : which_(which) {}
  BlasFlag(const BlasFlag&) = delete;
  BlasFlag& operator=(const BlasFlag&) = delete;
  BlasFlag& operator=(bool allow);
  operator bool() const;  // NOLINT

 private:
  BlasSwitch which_;
};

struct MatmulFlags {
  MatmulTf32Flag allow_tf32;
  /// float16 / bfloat16 GEMMs may reduce split-k partial sums in their own precision (default true).
  BlasFlag allow_fp16_reduced_precision_reduction{BlasSwitch::kFp16ReducedPrecisionReduction};
  BlasFlag allow_bf16_reduced_precision_reduction{BlasSwitch::kBf16ReducedPrecisionReduction};
  /// float16 GEMMs accumulate in float16 (default false).
  BlasFlag allow_fp16_accumulation{BlasSwitch::kFp16Accumulation};
  Fp32Precision fp32_precision{Fp32Setting::kMatmul};
};
struct CudnnFamily {
  Fp32Precision fp32_precision;
};
struct CudnnFlags {
  CudnnTf32Flag allow_tf32;
  Fp32Precision fp32_precision{Fp32Setting::kCudnn};
  CudnnFamily conv{Fp32Precision{Fp32Setting::kConv}};
  CudnnFamily rnn{Fp32Precision{Fp32Setting::kRnn}};
};
}  // namespace detail

/// torch.backends.fp32_precision: the global setting the others inherit through "none".
inline detail::Fp32Precision fp32_precision{detail::Fp32Setting::kGlobal};

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
